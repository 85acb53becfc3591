import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import searchAttributes from '../temporal-config/search-attributes.json';
import { stopOrphan } from './orphans';
import { resolveTemporalCli } from './temporal-cli';
import type { Logger } from './logger';

export interface DevServerOptions {
  port: number;
  /** Web UI port; omit for a headless server (tests). */
  uiPort?: number;
  /** SQLite file; omit for an in-memory server (tests). */
  dbFile?: string;
  /** where the server's pid is kept while it runs, so a later start can stop it if this process is killed */
  pidFile?: string;
  namespace: string;
  logger: Logger;
  /** the address the frontend listens on (default 127.0.0.1) */
  ip?: string;
}

export interface DevServer {
  address: string;
  stop(): Promise<void>;
}

/** The dev server's size limit per search attribute value, in bytes (a server's default is 2 KB). */
export const DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT = 8192;

export function searchAttributeFlags(): string[] {
  return Object.entries(searchAttributes.attributes).flatMap(([name, type]) => ['--search-attribute', `${name}=${type}`]);
}

/** Starts `temporal server start-dev` as a child process and waits until it answers. */
export async function startTemporalDevServer(opts: DevServerOptions): Promise<DevServer> {
  const cli = resolveTemporalCli();
  const args = ['server', 'start-dev', '--ip', opts.ip ?? '127.0.0.1', '--port', String(opts.port), '--namespace', opts.namespace];
  args.push('--log-level', 'warn', '--log-format', 'json');
  args.push(...searchAttributeFlags());
  // Reservations are short and many: keep the dev server from throttling a benchmark.
  args.push('--dynamic-config-value', 'frontend.rps=100000', '--dynamic-config-value', 'frontend.namespaceRPS=100000');
  // Settlement batches larger than 50 list every request id in one search attribute value.
  args.push('--dynamic-config-value', `frontend.searchAttributesSizeOfValueLimit=${DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT}`);
  if (opts.dbFile) {
    fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
    // WAL with normal sync: still crash-safe for the file, without an fsync per write (the
    // default journal costs about 70 fsyncs per reservation workflow on this kind of disk).
    args.push('--db-filename', opts.dbFile, '--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
  }
  if (opts.uiPort) args.push('--ui-port', String(opts.uiPort));
  else args.push('--headless');

  if (opts.pidFile) await stopOrphan(opts.pidFile, /temporal.*start-dev/, 'a Temporal dev server', opts.logger);
  if (await portOpen(opts.ip ?? '127.0.0.1', opts.port)) {
    throw new Error(`port ${opts.port} is taken, so the Temporal dev server cannot start: another Temporal (or program) listens there. Stop it, set TEMPORAL_PORT to a free port, or TEMPORAL_ADDRESS to use that server.`);
  }
  // a process group of its own: a Ctrl-C to the terminal reaches `npm start`, which stops it in order
  const child = spawn(cli, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  if (opts.pidFile && child.pid) fs.writeFileSync(opts.pidFile, `${child.pid}\n`);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const address = `${opts.ip ?? '127.0.0.1'}:${opts.port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`Temporal dev server exited (code ${code}):\n${stderr}`))),
  );
  try {
    await Promise.race([waitForNamespace(address, opts.namespace), exited]);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  child.removeAllListeners('exit');
  opts.logger.info({ address, ui: opts.uiPort ? `http://127.0.0.1:${opts.uiPort}` : null }, 'temporal dev server ready');
  return {
    address,
    stop: async () => {
      await stopChild(child);
      if (opts.pidFile) fs.rmSync(opts.pidFile, { force: true });
    },
  };
}

async function waitForNamespace(address: string, namespace: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const [host, port] = address.split(':');
  while (Date.now() < deadline) {
    if (await portOpen(host, Number(port))) {
      try {
        const conn = await Connection.connect({ address, connectTimeout: 2000 });
        try {
          await conn.workflowService.describeNamespace({ namespace });
          return;
        } finally {
          await conn.close();
        }
      } catch {
        // not ready yet
      }
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Temporal at ${address} did not become ready within ${timeoutMs} ms`);
}

export function portOpen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** SIGTERM, then SIGKILL after a grace period, so SQLite gets a clean shutdown when it can. */
export function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
