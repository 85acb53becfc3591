import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { NodeOperation, SiteSpec } from '../../domain/panel/node-ops';
import { listen, type Listening } from '../../platform/http-server';

// Helpers for hosting node tests: a node root www-data can enter, a site spec, a GET with a Host
// header (fetch() drops a Host header it is given), and a fake panel node API for the agent.

/** A fresh node root under the temp folder, mode 755 so nginx's and PHP's www-data can enter it. */
export function tempNodeRoot(prefix = 'hn-'): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(root, 0o755);
  return root;
}

let n = 0;
export function siteSpec(over: Partial<SiteSpec> = {}): SiteSpec {
  n++;
  return {
    id: `site-${process.pid}-${n}`,
    domain: `site${n}.example.com`,
    aliases: [],
    phpVersion: null,
    cron: [],
    suspended: false,
    php: { workers: 2, allowUrlFopen: false, disabledFunctions: [] },
    generation: 1,
    ...over,
  };
}

export const opId = (): string => `op-${process.pid}-${++n}`;

/** GET http://127.0.0.1:port + path with the given Host header; the raw path is sent as is. */
export function siteGet(port: number, host: string, urlPath = '/'): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
    });
    req.on('error', reject);
  });
}

export interface FakePanel {
  url: string;
  enrolments: unknown[];
  heartbeats: Array<Record<string, unknown>>;
  /** results as accepted, by operation id (a result the panel answered 503 to is not here) */
  results: Map<string, unknown>;
  resultAttempts: Map<string, number>;
  queue: NodeOperation[];
  /** while true every call answers 503 */
  down: boolean;
  /** the first N result posts answer 503 */
  failResults: number;
  authorizations: Set<string>;
  close(): Promise<void>;
}

/** The node API of spec PANEL.md section 1 (domain/panel/node-ops.ts), in memory. */
export async function startFakePanel(): Promise<FakePanel> {
  const state = {
    enrolments: [] as unknown[],
    heartbeats: [] as Array<Record<string, unknown>>,
    results: new Map<string, unknown>(),
    resultAttempts: new Map<string, number>(),
    queue: [] as NodeOperation[],
    down: false,
    failResults: 0,
    authorizations: new Set<string>(),
  };
  const json = (res: http.ServerResponse, status: number, body?: unknown) => {
    res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
    res.end(body === undefined ? undefined : JSON.stringify(body));
  };
  const srv: Listening = await listen(async (req, res) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    state.authorizations.add(String(req.headers.authorization));
    if (state.down) return json(res, 503, { error: { code: 'unavailable' } });
    const url = new URL(req.url!, 'http://panel');
    if (req.method === 'POST' && url.pathname === '/node/v1/enrol') {
      state.enrolments.push(JSON.parse(text));
      return json(res, 200, { node: JSON.parse(text).node, heartbeatSeconds: 10 });
    }
    if (req.method === 'GET' && url.pathname === '/node/v1/operations') {
      // a short long-poll: answers as soon as something is queued, else after 300 ms
      for (let i = 0; i < 6 && state.queue.length === 0 && !state.down; i++) await new Promise((r) => setTimeout(r, 50));
      return json(res, 200, { operations: state.queue.splice(0) });
    }
    const m = /^\/node\/v1\/operations\/([^/]+)\/result$/.exec(url.pathname);
    if (req.method === 'POST' && m) {
      const id = decodeURIComponent(m[1]);
      state.resultAttempts.set(id, (state.resultAttempts.get(id) ?? 0) + 1);
      if (state.failResults > 0) {
        state.failResults--;
        return json(res, 503);
      }
      state.results.set(id, JSON.parse(text));
      return json(res, 204);
    }
    if (req.method === 'POST' && url.pathname === '/node/v1/heartbeat') {
      state.heartbeats.push(JSON.parse(text));
      return json(res, 204);
    }
    json(res, 404, { error: { code: 'not_found' } });
  }, 0);
  return Object.assign(state, { url: srv.url, close: () => srv.close() });
}
