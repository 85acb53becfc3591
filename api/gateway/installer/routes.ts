import fs from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import { GatewayError } from '../../../domain/shared/errors';

/** The scripts carry this placeholder where the gateway's own address goes. */
export const BASE_URL_PLACEHOLDER = '__GATEWAY_BASE_URL__';

export const SCRIPTS = ['install.sh', 'uninstall.sh', 'install.ps1', 'uninstall.ps1'] as const;

// The Host header ends up inside a script the client runs, so only plain host names and IP
// literals are accepted: a crafted header must not be able to inject script text.
const HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

/** The line in each script where the functions both scripts of a platform share are spliced in. */
const COMMON_MARKER = /^__GATEWAY_COMMON__$/m;

const read = (name: string) => fs.readFileSync(path.join(__dirname, name), 'utf8');

/** A script as served, before the base URL: the shared part of its platform spliced in. */
function assemble(name: string): string {
  const common = read(name.endsWith('.ps1') ? 'common.ps1' : 'common.sh');
  return read(name).replace(COMMON_MARKER, () => common.trimEnd());
}

// Read once at startup; split so each request only joins the parts around the placeholder.
const templates = new Map<string, string[]>(SCRIPTS.map((name) => [name, assemble(name).split(BASE_URL_PLACEHOLDER)]));

/** GET /install.sh, /uninstall.sh, /install.ps1, /uninstall.ps1 (spec 1 section 1 item 8), no authentication. */
export function installerRoutes(): Router {
  const router = new Router();
  for (const name of SCRIPTS) {
    const parts = templates.get(name) ?? [];
    router.get(`/${name}`, (ctx) => {
      if (!HOST.test(ctx.host)) throw new GatewayError('invalid_request', { detail: 'the Host header is not a plain host name or IP address' });
      ctx.set('cache-control', 'no-cache');
      ctx.type = 'text/plain; charset=utf-8';
      // app.proxy is false, so protocol and host come from the socket and the Host header only.
      ctx.body = parts.join(`${ctx.protocol}://${ctx.host}`);
    });
  }
  return router;
}
