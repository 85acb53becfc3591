import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { MIME_TYPES, renderSuspendedPage } from '../domain/panel/node-config';
import { listen, type Listening } from '../platform/http-server';

// Where nginx is not installed, the node serves the same docroots itself (static files only, no
// PHP): by Host header, GET and HEAD, never a file outside the site's docroot (no `..`, no dot
// files, no symlink leading out), the suspended page (503) for a suspended site.

export interface BuiltinSite {
  docroot: string;
  suspended: boolean;
}

export function startBuiltinWeb(o: { host: string; port: number; site: (host: string) => BuiltinSite | null }): Promise<Listening> {
  const send = (res: http.ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8', extra: http.OutgoingHttpHeaders = {}) => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
    res.end(res.req.method === 'HEAD' ? undefined : body);
  };
  return listen(async (req, res) => {
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'method not allowed\n', undefined, { allow: 'GET, HEAD' });
      const site = o.site((req.headers.host ?? '').toLowerCase().replace(/:\d+$/, ''));
      if (!site) return send(res, 404, 'no site here\n');
      if (site.suspended) return send(res, 503, renderSuspendedPage(), 'text/html; charset=utf-8', { 'cache-control': 'no-store' });
      let pathname: string;
      try {
        pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://site').pathname);
      } catch {
        return send(res, 400, 'bad path\n');
      }
      const parts = pathname.split('/').filter(Boolean);
      // `..`, `.`, dot files, NUL and backslashes never name a file of the site
      if (parts.some((s) => s.startsWith('.') || s.includes('\0') || s.includes('\\'))) return send(res, 404, 'not found\n');
      const docroot = await fs.promises.realpath(site.docroot);
      let file = await fs.promises.realpath(path.join(docroot, ...parts)).catch(() => null);
      if (file !== null && file !== docroot && !file.startsWith(`${docroot}/`)) file = null; // a symlink leading out
      if (file === null) return send(res, 404, 'not found\n');
      let st = await fs.promises.stat(file);
      if (st.isDirectory()) {
        if (!pathname.endsWith('/')) return send(res, 301, '', undefined, { location: `${pathname}/` });
        const index = ['index.html', 'index.htm'].map((n) => path.join(file!, n)).find((f) => fs.existsSync(f));
        if (!index) return send(res, 404, 'not found\n');
        file = index;
        st = await fs.promises.stat(file);
      }
      const ext = path.extname(file).slice(1).toLowerCase();
      // no PHP here: its source is never sent
      if (!st.isFile() || ext === 'php') return send(res, 404, 'not found\n');
      const type = MIME_TYPES[ext] ?? 'application/octet-stream';
      res.writeHead(200, { 'content-type': type.startsWith('text/') ? `${type}; charset=utf-8` : type, 'content-length': st.size });
      if (req.method === 'HEAD') return res.end();
      fs.createReadStream(file).on('error', () => res.destroy()).pipe(res);
    } catch {
      if (!res.headersSent) send(res, 500, 'error\n');
      else res.destroy();
    }
  }, o.port, o.host);
}
