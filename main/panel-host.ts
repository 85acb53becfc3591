import { startAgent } from '../hosting-node/agent';
import { parseHostFlags } from '../hosting-node/host-flags';
import { serveFlags } from '../platform/panel-flags';
import { startHostingNode } from '../hosting-node';
import { createPanelClient } from '../hosting-node/panel-client';
import { createLogger } from '../platform/logger';

// `panel-host serve -node NAME -root DIR -panel URL -token-file F [-backup-dir DIR]
// [-web-listen ADDR] [-mariadb-port P]`: the agent of a hosting node other than the panel's own
// (PANEL.md sections 1-2). Runs the node's nginx, PHP-FPM and MariaDB under DIR, enrols with the
// panel's node API and applies the operations it pulls. SIGTERM or SIGINT stops it cleanly.

const USAGE = `usage: panel-host serve -node NAME -root DIR -panel URL -token-file FILE
                       [-backup-dir DIR] [-web-listen HOST:PORT (default :80)] [-mariadb-port PORT]
                       [-web-tls-port PORT (HTTPS for sites with a certificate)] [-sftp-port PORT (SFTP for site owners)]`;

async function main(argv: string[]) {
  const flags = serveFlags('panel-host', USAGE, argv, parseHostFlags);
  const log = createLogger(process.env.LOG_LEVEL ?? 'info').child({ node: flags.node });
  // a signal while the services start is handled once they are up, so none is left running
  let signalled: string | null = null;
  let stop = async (signal: string) => void (signalled = signal);
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  const node = await startHostingNode({
    root: flags.root,
    webHost: flags.webListen.host,
    webPort: flags.webListen.port,
    webTlsPort: flags.webTlsPort,
    mariadbPort: flags.mariadbPort,
    sftpPort: flags.sftpPort,
    backupDir: flags.backupDir,
    logger: log,
  });
  const agent = startAgent({ node: flags.node, client: createPanelClient({ url: flags.panel, token: flags.token }), hostingNode: node, logger: log });
  log.info({ root: node.root, facts: node.facts(), panel: flags.panel }, 'panel-host running');
  let stopping = false;
  stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    await agent.stop();
    await node.stop();
    process.exit(0);
  };
  if (signalled) await stop(signalled);
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`panel-host failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
