import { spawn } from 'node:child_process';
import type { SiteWriter } from '../domain/panel/own-node';
import type { SiteUser } from './site-users';

// Writes into a site's docroot as the site's own user: a child process (this Node binary, a short
// script with no imports of ours) started with the user's uid and gid takes framed commands on its
// stdin. The node process runs as root, and the site's code may swap any folder of its docroot for
// a link at any moment; as the site's user, whatever such a link leads to, the child can only reach
// what the site may reach anyway. A frame is [u32 header length][u32 data length][JSON][data].

const CHILD = `
const fs = require('fs'), path = require('path');
const base = fs.realpathSync(process.env.SITE_WRITER_BASE);
const within = (a) => a === base || a.startsWith(base + '/');
const at = (p) => { const a = path.resolve(base, p); if (!within(a)) throw new Error('outside the docroot: ' + p); return a; };
// a folder swapped for a link meanwhile is caught here, before anything is put in it
const real = (p) => { const r = fs.realpathSync(at(p)); if (!within(r)) throw new Error('the path leads outside the docroot: ' + p); return r; };
let fd = null, buf = Buffer.alloc(0);
const ops = {
  mkdir: (h) => { fs.mkdirSync(at(h.path), { recursive: true, mode: 0o755 }); real(h.path); },
  open: (h) => { fd = fs.openSync(at(h.path), fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, h.mode); },
  data: (h, d) => { for (let o = 0; o < d.length; ) o += fs.writeSync(fd, d, o); },
  close: (h) => { fs.closeSync(fd); fd = null; try { real(path.dirname(h.rename)); } catch (e) { fs.rmSync(at(h.path), { force: true }); throw e; } fs.renameSync(at(h.path), at(h.rename)); },
  abort: (h) => { if (fd !== null) fs.closeSync(fd); fd = null; fs.rmSync(at(h.path), { force: true }); },
  symlink: (h) => { fs.rmSync(at(h.path), { force: true }); fs.symlinkSync(h.target, at(h.path)); },
  copy: (h) => fs.copyFileSync(at(h.from), at(h.path)),
  rm: (h) => fs.rmSync(at(h.path), { recursive: true, force: true }),
  empty: (h) => { const d = at(h.path); for (const n of fs.existsSync(d) ? fs.readdirSync(d) : []) fs.rmSync(path.join(d, n), { recursive: true, force: true }); },
  sweep: (h) => { const re = new RegExp(h.pattern); for (const f of fs.readdirSync(base, { recursive: true, withFileTypes: true })) if (f.isFile() && re.test(f.name)) fs.rmSync(path.join(f.parentPath, f.name), { force: true }); },
};
process.stdin.on('data', (c) => {
  buf = buf.length ? Buffer.concat([buf, c]) : c;
  while (buf.length >= 8) {
    const hl = buf.readUInt32BE(0), dl = buf.readUInt32BE(4);
    if (buf.length < 8 + hl + dl) break;
    const h = JSON.parse(buf.subarray(8, 8 + hl).toString());
    const d = buf.subarray(8 + hl, 8 + hl + dl);
    buf = buf.subarray(8 + hl + dl);
    try { ops[h.op](h, d); } catch (e) { process.stderr.write(h.op + ': ' + e.message); process.exit(1); }
  }
});
process.stdin.on('end', () => process.exit(buf.length ? 1 : 0));
`;

const CHUNK = 64 * 1024;

/** A writer into `base` (a docroot) running as `owner`; without one (no site users on this node), as this process's user. */
export function siteWriter(base: string, owner: SiteUser | null): SiteWriter {
  const as = owner ? { uid: owner.uid, gid: owner.gid } : {};
  const child = spawn(process.execPath, ['-e', CHILD], { ...as, cwd: '/', env: { SITE_WRITER_BASE: base }, stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  let broken: Error | null = null;
  child.stdin.on('error', (err) => (broken ??= err));
  const failure = async () => {
    const code = await exited;
    return new Error(`writing the site's files${owner ? ` as ${owner.name}` : ''} failed: ${stderr || `exit ${code}`}`);
  };
  const send = async (header: object, data: Buffer = Buffer.alloc(0)): Promise<void> => {
    if (broken || child.exitCode !== null) throw await failure();
    const h = Buffer.from(JSON.stringify(header));
    const head = Buffer.alloc(8);
    head.writeUInt32BE(h.length, 0);
    head.writeUInt32BE(data.length, 4);
    child.stdin.write(head);
    child.stdin.write(h);
    if (!child.stdin.write(data)) {
      await new Promise<void>((resolve) => {
        const go = () => {
          child.stdin.off('drain', go);
          child.removeListener('close', go);
          resolve();
        };
        child.stdin.once('drain', go);
        child.once('close', go);
      });
    }
  };
  const done = async () => {
    child.stdin.end();
    if ((await exited) !== 0) throw await failure();
  };
  return {
    mkdir: (rel) => send({ op: 'mkdir', path: rel }),
    async file(rel, tmp, mode, source) {
      await send({ op: 'open', path: tmp, mode });
      try {
        for await (const chunk of source) for (let o = 0; o < chunk.length; o += CHUNK) await send({ op: 'data' }, chunk.subarray(o, o + CHUNK));
      } catch (err) {
        await send({ op: 'abort', path: tmp }).catch(() => {});
        throw err;
      }
      await send({ op: 'close', path: tmp, rename: rel });
    },
    symlink: (rel, target) => send({ op: 'symlink', path: rel, target }),
    copy: (fromRel, rel) => send({ op: 'copy', from: fromRel, path: rel }),
    rm: (rel) => send({ op: 'rm', path: rel }),
    empty: (rel) => send({ op: 'empty', path: rel }),
    sweep: (pattern) => send({ op: 'sweep', pattern: pattern.source }),
    done,
  };
}

/** Empties a site's docroot and temp folder as its user (the site may be live), so that root then removes only what is root's. */
export async function clearSiteFolder(siteDir: string, owner: SiteUser): Promise<void> {
  const w = siteWriter(siteDir, owner);
  await w.empty('public_html');
  await w.empty('tmp');
  await w.done();
}
