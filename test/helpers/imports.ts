import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { run } from '../../hosting-node/processes';
import type { PanelClient, Reply } from './panel';

// Legacy import helpers for the panel tests: upload an archive as the raw body, wait for a run to
// settle, and query the hosting node's MariaDB as its administrator.

/** Uploads `file` into the customer account `orgId`. */
export async function uploadArchive(c: PanelClient, orgId: string, file: string): Promise<Reply> {
  const res = await fetch(`${c.base}/v1/orgs/${orgId}/imports?name=${encodeURIComponent(path.basename(file))}`, {
    method: 'POST',
    headers: { 'content-type': 'application/gzip', ...(c.cookie ? { cookie: c.cookie } : {}), ...(c.cookie && c.csrf ? { 'x-csrf-token': c.csrf } : {}) },
    body: fs.readFileSync(file),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

/** Waits until the import's run is done or stopped. */
export async function settledImport(c: PanelClient, id: string, timeoutMs = 90_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/imports/${id}`);
    if (r.status !== 200) throw new Error(`import ${id}: ${r.status} ${JSON.stringify(r.json)}`);
    if (r.json.status === 'done' || r.json.status === 'stopped') return r;
    if (Date.now() > deadline) throw new Error(`import ${id} still ${r.json.status}: ${JSON.stringify(r.json.progress)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** SQL as the node's administrator over its socket. */
export async function adminSql(root: string, sql: string): Promise<string> {
  const r = await run('mariadb', ['--no-defaults', `--socket=${path.join(root, 'run/my.sock')}`, `--user=${os.userInfo().username}`, '--batch', '--skip-column-names', '-e', sql], { timeoutMs: 20_000 });
  if (r.code !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

