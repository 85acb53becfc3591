import fs from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import type { Context } from 'koa';
import { openApiDocument, type ApiDescription } from './openapi';

export interface ServedDocument {
  /** where the document is served: /openapi.json, /admin/openapi.json, … */
  path: string;
  api: () => ApiDescription;
}

const SWAGGER_UI = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = { 'swagger-ui.css': 'text/css; charset=utf-8', 'swagger-ui-bundle.js': 'text/javascript; charset=utf-8', 'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8' };

/**
 * Serves each document as JSON (built once, on first request) and `/docs`: swagger-ui from
 * node_modules (no CDN), one dropdown entry per document. Open: the documents hold no secrets.
 */
export function openApiRoutes(documents: ServedDocument[], docsPath = '/docs'): Router {
  const r = new Router();
  for (const d of documents) {
    let body: Record<string, unknown> | null = null;
    r.get(d.path, (ctx) => {
      body ??= openApiDocument(d.api());
      ctx.set('cache-control', 'no-cache');
      ctx.body = body;
    });
  }
  const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>API documents</title>
<link rel="stylesheet" href="${docsPath}/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="${docsPath}/assets/swagger-ui-bundle.js"></script>
<script src="${docsPath}/assets/swagger-ui-standalone-preset.js"></script>
<script src="${docsPath}/assets/init.js"></script></body></html>
`;
  // validatorUrl null: swagger-ui would otherwise send the document to validator.swagger.io
  const init = `SwaggerUIBundle({ dom_id: '#swagger-ui', urls: ${JSON.stringify(documents.map((d) => ({ url: d.path, name: d.path })))}, presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'StandaloneLayout', deepLinking: true, validatorUrl: null });\n`;
  r.get(docsPath, (ctx) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = page;
  });
  r.get(`${docsPath}/assets/:file`, (ctx: Context) => {
    const file = ctx.params.file;
    if (file === 'init.js') {
      ctx.type = 'text/javascript; charset=utf-8';
      ctx.body = init;
      return;
    }
    const type = ASSETS[file];
    if (!type) return; // 404 in the API's envelope
    ctx.type = type;
    ctx.set('cache-control', 'public, max-age=86400');
    ctx.body = fs.createReadStream(path.join(SWAGGER_UI, file));
  });
  return r;
}
