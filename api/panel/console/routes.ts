import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import QRCode from 'qrcode';
import { z } from 'zod';
import { bodyOf } from '../shared/http';

// The web console (PANEL.md section 5), served by panel-api next to /v1.
//
// Stack: preact + htm loaded as native ES modules straight from node_modules through an import
// map, the console's own modules from ./web: no build step, nothing to download at run time, and
// a page is a module of plain JavaScript that calls the JSON API, so a new page (alerts, billing,
// backups, migration) is one file in ./web/pages registered in ./web/pages/index.js. We chose this
// over server-rendered pages because the console is a client of the same /v1 API as everyone else:
// the API's rules and error messages are the only ones, and the pages hold no logic of their own.

const WEB = path.join(__dirname, 'web');

/** The bare module names the console imports, and where they are in node_modules. */
// htm exports no ES module path to require(): its ES module sits next to the CommonJS entry.
const VENDOR: Record<string, { pkg: string; resolve: string; sibling?: string }> = {
  preact: { pkg: 'preact', resolve: 'preact' },
  'preact/hooks': { pkg: 'preact', resolve: 'preact/hooks' },
  htm: { pkg: 'htm', resolve: 'htm', sibling: 'htm.mjs' },
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  cache: string;
}

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml' };

const asset = (body: Buffer | string, file: string, cache: string): Asset => {
  const b = Buffer.from(body);
  return { body: b, type: TYPES[path.extname(file)] ?? 'application/octet-stream', etag: `"${createHash('sha256').update(b).digest('base64url').slice(0, 22)}"`, cache };
};

/** The package's folder (the nearest package.json of that name above its entry point) and version. */
function packageOf(name: string, entry: string): { dir: string; version: string } {
  for (let dir = path.dirname(entry); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const pj = path.join(dir, 'package.json');
    if (fs.existsSync(pj)) {
      const p = JSON.parse(fs.readFileSync(pj, 'utf8')) as { name?: string; version: string };
      if (p.name === name) return { dir, version: p.version };
    }
  }
  throw new Error(`console: package ${name} not found above ${entry}`);
}

/** Vendor files under versioned URLs (cached for a year, immutable); the import map names them. */
function vendorAssets(): { imports: Record<string, string>; files: Map<string, Asset> } {
  const imports: Record<string, string> = {};
  const files = new Map<string, Asset>();
  for (const [spec, v] of Object.entries(VENDOR)) {
    const resolved = require.resolve(v.resolve);
    const entry = v.sibling ? path.join(path.dirname(resolved), v.sibling) : resolved;
    const { dir, version } = packageOf(v.pkg, entry);
    const url = `/console/vendor/${v.pkg}@${version}/${path.relative(dir, entry).split(path.sep).join('/')}`;
    imports[spec] = url;
    files.set(url, asset(fs.readFileSync(entry), entry, 'public, max-age=31536000, immutable'));
  }
  return { imports, files };
}

function indexPage(imports: Record<string, string>): { html: Asset; csp: string } {
  const importMap = JSON.stringify({ imports });
  const hash = createHash('sha256').update(importMap).digest('base64');
  const preload = [...Object.values(imports), '/console/app/app.js'].map((u) => `<link rel="modulepreload" href="${u}">`).join('\n');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hosting panel</title>
<link rel="stylesheet" href="/console/app/console.css">
<script type="importmap">${importMap}</script>
${preload}
<script type="module" src="/console/app/app.js"></script>
</head>
<body><div id="app"><noscript>The console needs JavaScript; the HTTP API is under /v1.</noscript></div></body>
</html>
`;
  // Inline scripts: only the import map (by its hash). Styles set through the DOM (the accent colour) are allowed.
  const csp = `default-src 'none'; script-src 'self' 'sha256-${hash}'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;
  return { html: asset(html, 'index.html', 'no-cache'), csp };
}

function send(ctx: Context, a: Asset): void {
  ctx.set('cache-control', a.cache);
  ctx.set('x-content-type-options', 'nosniff');
  ctx.etag = a.etag;
  ctx.type = a.type;
  ctx.status = 200;
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  ctx.body = a.body;
}

/** The console's own modules: read once, revalidated by ETag (no-cache) so a new release shows at once. */
const APP_FILE = /^[a-z0-9_-]+(?:\/[a-z0-9_-]+)*\.(?:js|css)$/;

const qrBody = z.strictObject({ text: z.string().startsWith('otpauth://', 'must be an otpauth:// URI').max(1024) });

/** The console: its assets and QR route, and its page for every address a browser asks for outside /v1. */
export function consoleApp(): Middleware {
  const vendor = vendorAssets();
  const index = indexPage(vendor.imports);
  const assets = assetRoutes(vendor.files).routes() as unknown as Middleware;
  // Every page of the console is the same document; its router draws the page of the address.
  return (ctx: Context, next: Next) => {
    const page = (ctx.method === 'GET' || ctx.method === 'HEAD') && !/^\/(v1|console)(\/|$)/.test(ctx.path) && ctx.path !== '/healthz' && ctx.get('accept').includes('text/html');
    if (!page) return assets(ctx, next);
    ctx.set('content-security-policy', index.csp);
    ctx.set('x-frame-options', 'DENY');
    ctx.set('referrer-policy', 'same-origin');
    send(ctx, index.html);
  };
}

function assetRoutes(vendor: Map<string, Asset>): Router {
  const app = new Map<string, Asset>();
  const r = new Router();

  r.get('/console/vendor/*path', (ctx) => {
    const a = vendor.get(ctx.path);
    if (a) send(ctx, a);
  });
  r.get('/console/app/*path', async (ctx) => {
    const rel = ctx.path.slice('/console/app/'.length);
    if (!APP_FILE.test(rel)) return;
    let a = app.get(rel);
    if (!a) {
      const file = path.join(WEB, rel);
      const body = await fs.promises.readFile(file).catch(() => null);
      if (!body) return;
      a = asset(body, file, 'no-cache');
      app.set(rel, a);
    }
    send(ctx, a);
  });
  // The QR code of a two-factor enrolment, drawn here so the browser needs no QR library; POST so
  // the secret inside the URI never lands in an address or an access log.
  r.post('/console/qr', async (ctx) => {
    const b = await bodyOf(ctx, qrBody);
    ctx.set('cache-control', 'no-store');
    ctx.type = 'image/svg+xml';
    ctx.body = await QRCode.toString(b.text, { type: 'svg', margin: 1, errorCorrectionLevel: 'M' });
  });
  return r;
}
