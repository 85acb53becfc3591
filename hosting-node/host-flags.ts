import fs from 'node:fs';
import path from 'node:path';
import { isNodeName } from '../domain/panel/node-ops';
import { isSafeRoot } from '../domain/panel/node-config';
import { parseFlags, stringFlags, UsageError } from '../platform/cli-args';

// The flags of `panel-host serve` (PANEL.md section 1, spec 2 section 4.3), parsed like
// panel-api's: `-flag value`, `--flag value` or `--flag=value`; a bad value names its flag.

export interface HostFlags {
  node: string;
  root: string;
  panel: string;
  tokenFile: string;
  /** the token read from tokenFile */
  token: string;
  backupDir: string | null;
  webListen: { host: string; port: number };
  mariadbPort: number | null;
  /** -web-tls-port: HTTPS for sites with a certificate, on the -web-listen host; null: none */
  webTlsPort: number | null;
  /** -sftp-port: SFTP for the sites (the node's own sshd), on the -web-listen host; null: none */
  sftpPort: number | null;
}


const REQUIRED = ['node', 'root', 'panel', 'token-file'] as const;
const HOST_FLAGS = stringFlags([...REQUIRED, 'backup-dir', 'web-listen', 'mariadb-port', 'web-tls-port', 'sftp-port']);

const port = (v: string) => (/^\d{1,5}$/.test(v) && Number(v) >= 1 && Number(v) <= 65535 ? Number(v) : null);

export function parseHostFlags(argv: string[]): HostFlags {
  const raw = new Map(Object.entries(parseFlags(argv, HOST_FLAGS, { dash: '-' }).values));
  for (const r of REQUIRED) if (!raw.has(r)) throw new UsageError(`-${r} is required`);
  const bad = (name: string, why: string) => new UsageError(`-${name} ${JSON.stringify(raw.get(name))}: ${why}`);
  const node = raw.get('node')!;
  if (!isNodeName(node)) throw bad('node', 'a node name: lower-case letters, digits and -, at most 63');
  const root = path.resolve(raw.get('root')!);
  if (!isSafeRoot(root)) throw bad('root', 'a folder path of letters, digits and . _ - only');
  const panel = raw.get('panel')!;
  let url: URL | null = null;
  try {
    url = new URL(panel);
  } catch {
    // reported below
  }
  if (!url || !['http:', 'https:'].includes(url.protocol)) throw bad('panel', 'the panel node API URL, such as http://panel.example:8091');
  const tokenFile = raw.get('token-file')!;
  let token: string;
  try {
    token = fs.readFileSync(tokenFile, 'utf8').trim();
  } catch (err) {
    throw bad('token-file', `cannot be read (${(err as Error).message})`);
  }
  if (!token || /\s/.test(token)) throw bad('token-file', 'must hold the node token (one line)');
  let webListen = { host: '0.0.0.0', port: 80 };
  if (raw.has('web-listen')) {
    const m = /^(?:([0-9.]*|localhost)|\[([0-9a-f:]+)\]):(\d{1,5})$/i.exec(raw.get('web-listen')!);
    const p = m ? port(m[3]) : null;
    if (!m || p === null) throw bad('web-listen', 'an address host:port, such as 0.0.0.0:80 or :8080');
    webListen = { host: (m[1] === 'localhost' ? '127.0.0.1' : m[1]) || m[2] || '0.0.0.0', port: p };
  }
  let mariadbPort: number | null = null;
  if (raw.has('mariadb-port')) {
    mariadbPort = port(raw.get('mariadb-port')!);
    if (mariadbPort === null) throw bad('mariadb-port', 'a port number 1-65535');
  }
  const webTlsPort = raw.has('web-tls-port') ? port(raw.get('web-tls-port')!) : null;
  if (raw.has('web-tls-port') && webTlsPort === null) throw bad('web-tls-port', 'a port number 1-65535');
  const sftpPort = raw.has('sftp-port') ? port(raw.get('sftp-port')!) : null;
  if (raw.has('sftp-port') && sftpPort === null) throw bad('sftp-port', 'a port number 1-65535');
  if (raw.get('backup-dir') === '') throw bad('backup-dir', 'a folder path');
  const backupDir = raw.has('backup-dir') ? path.resolve(raw.get('backup-dir')!) : null;
  return { node, root, panel, tokenFile, token, backupDir, webListen, mariadbPort, webTlsPort, sftpPort };
}
