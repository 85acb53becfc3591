import { spawn } from 'node:child_process';
import fs from 'node:fs';

// The real OpenSSH `sftp` client against a node's sshd (test/panel/sites/sftp*.test.ts): one batch of
// commands, and what of a site user's sessions the node's sshd runs, read from /proc.

export const sftpArgs = (key: string, port: number, user: string) => [
  '-b', '-', '-i', key, '-P', String(port),
  '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=10', '-o', 'LogLevel=ERROR',
  `${user}@127.0.0.1`,
];

/** One batch of sftp commands (a leading `-` lets a command fail without ending the batch). */
export function sftp(key: string, port: number, user: string, commands: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('sftp', sftpArgs(key, port, user), { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (out += String(d)));
    child.on('close', (code) => resolve({ code: code ?? -1, out }));
    child.stdin.end(commands.map((c) => `${c}\n`).join(''));
  });
}

/** The sshd processes of a site user's sessions (`sshd: user@notty` and its internal-sftp child). */
export const sessionProcs = (uid: number) =>
  fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      return new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(fs.readFileSync(`/proc/${p}/status`, 'utf8')) && fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').startsWith('sshd');
    } catch {
      return false;
    }
  });

/** The user's connections on the node's sshd (one `@notty` process each). */
export const connections = (uid: number) => sessionProcs(uid).filter((p) => fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('@notty')).length;
