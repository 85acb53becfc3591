import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { request } from 'undici';
import { parseFlags, UsageError } from '../platform/cli-args';
import { EXIT, exitCodeFor, jsonReport, junitXml, type RunAnswer } from './testrun-report';

// The CI release gate: `npm run -s testrun -- --project ID --cases a,b --wait`. Creates a run,
// executes it, waits for its terminal result, writes reports, and exits 0 only for `passed`.

const USAGE = `usage: npm run -s testrun -- --project ID (--cases id1,id2 | --tags t1,t2) --wait
         [--configuration ID|NAME] [--config-json '{"deadline_seconds":600}'] [--label TEXT]
         [--base-url URL] [--token T] [--junit out.xml] [--json out.json] [--timeout S]
         [--idempotency-key K] [--run RUN_ID (wait for an existing run instead of creating one)]

  token: --token or TESTRUN_TOKEN; base URL: --base-url or TESTRUN_BASE_URL (default http://127.0.0.1:8080)
  --timeout: seconds to wait for a terminal result (default 3600); then the run is canceled
  exit: 0 passed, 1 failed, 2 error or unusable answer, 3 timed_out / canceled / lost sight, 4 wrong usage`;

/** An answer the CLI cannot use: exit 2. */
class Unusable extends Error {}
/** The run cannot be followed any more: exit 3. */
class Lost extends Error {}

interface Options {
  project: string;
  cases?: string[];
  tags?: string[];
  configuration?: string;
  configJson?: Record<string, unknown>;
  label?: string;
  baseUrl: string;
  token: string;
  junit?: string;
  json?: string;
  timeoutMs: number;
  idempotencyKey: string;
  runId?: string;
}

const list = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((x) => x.trim()).filter(Boolean));

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  const { values } = parseFlags(
    argv,
    {
      project: { type: 'string' },
      cases: { type: 'string' },
      tags: { type: 'string' },
      configuration: { type: 'string' },
      'config-json': { type: 'string' },
      label: { type: 'string' },
      wait: { type: 'boolean' },
      'base-url': { type: 'string' },
      token: { type: 'string' },
      junit: { type: 'string' },
      json: { type: 'string' },
      timeout: { type: 'string' },
      'idempotency-key': { type: 'string' },
      run: { type: 'string' },
      help: { type: 'boolean' },
    },
    { dash: '--' },
  );
  if (values.help) throw new UsageError('');
  if (!values.project) throw new UsageError('--project is required');
  const cases = list(values.cases);
  const tags = list(values.tags);
  if (!values.run && !cases?.length && !tags?.length) throw new UsageError('select cases with --cases id1,id2 or --tags t1,t2');
  const token = values.token ?? env.TESTRUN_TOKEN;
  if (!token) throw new UsageError('no CI token: give --token or set TESTRUN_TOKEN');
  const baseUrl = (values['base-url'] ?? env.TESTRUN_BASE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(baseUrl)) throw new UsageError(`--base-url ${baseUrl} is not an http(s) URL`);
  const timeout = values.timeout === undefined ? 3600 : Number(values.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0) throw new UsageError('--timeout must be a positive number of seconds');
  let configJson: Record<string, unknown> | undefined;
  if (values['config-json'] !== undefined) {
    try {
      configJson = JSON.parse(values['config-json']);
    } catch {
      throw new UsageError('--config-json is not valid JSON');
    }
    if (!configJson || typeof configJson !== 'object' || Array.isArray(configJson)) throw new UsageError('--config-json must be a JSON object');
  }
  return {
    project: values.project,
    cases,
    tags,
    configuration: values.configuration,
    configJson,
    label: values.label,
    baseUrl,
    token,
    junit: values.junit,
    json: values.json,
    timeoutMs: timeout * 1000,
    idempotencyKey: values['idempotency-key'] ?? randomUUID(),
    runId: values.run,
  };
}

interface Answer {
  status: number;
  json: unknown;
  retryAfterMs: number | null;
}

/** Retry-After in seconds or as an HTTP date. */
function retryAfter(v: string | string[] | undefined): number | null {
  if (typeof v !== 'string') return null;
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

class Api {
  constructor(private readonly o: Options) {}

  async call(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const res = await request(this.o.baseUrl + path, {
      method,
      headers: { authorization: `Bearer ${this.o.token}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, json, retryAfterMs: retryAfter(res.headers['retry-after']) };
  }
}

const transient = (status: number) => status === 429 || status === 408 || status >= 500;
const errorText = (a: Answer) => {
  const e = (a.json as { error?: { code?: string; message?: string } } | undefined)?.error;
  return e ? `${a.status} ${e.code}: ${e.message}` : `${a.status} (not a JSON error body)`;
};

/** Polls with growing delays (0.5 s × 1.5, at most 5 s), never sooner than a Retry-After says. */
class Backoff {
  private delay = 500;
  next(retryAfterMs: number | null): number {
    const d = Math.max(this.delay, retryAfterMs ?? 0);
    this.delay = Math.min(Math.round(this.delay * 1.5), 5000);
    return d;
  }
  reset() {
    this.delay = 500;
  }
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

function usableRun(a: Answer): RunAnswer {
  const r = a.json as RunAnswer | undefined;
  const ok =
    r &&
    typeof r === 'object' &&
    typeof r.id === 'string' &&
    typeof r.status === 'string' &&
    typeof r.final === 'boolean' &&
    r.counts !== null &&
    typeof r.counts === 'object' &&
    Array.isArray(r.cases);
  if (!ok) throw new Unusable(`the answer (HTTP ${a.status}) is not a run`);
  // A pass is believed only when it is consistent: every case has a passing result.
  if (r.status === 'passed' && !(r.final && r.counts.total > 0 && r.counts.passed === r.counts.total && r.cases.every((c) => c.status === 'passed'))) {
    throw new Unusable('the run says passed but its cases do not all have passing results');
  }
  return r;
}

class Progress {
  private last = '';
  private readonly tty = process.stderr.isTTY === true;
  constructor(private readonly started: number) {}
  show(r: RunAnswer) {
    const c = r.counts;
    const done = c.total - (c.pending ?? 0);
    const line = `run ${r.id} ${r.status} · ${done}/${c.total} done · ${c.passed} passed, ${c.failed} failed, ${c.errored} errored, ${c.not_run} not run`;
    if (line === this.last) return;
    this.last = line;
    const t = `[${((Date.now() - this.started) / 1000).toFixed(1)}s] `;
    process.stderr.write(this.tty ? `\r\x1b[2K${t}${line}` : `${t}${line}\n`);
  }
  end() {
    if (this.tty && this.last) process.stderr.write('\n');
  }
}

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = new Date();
  let o: Options;
  try {
    o = parseOptions(argv, env);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message ? `testrun: ${err.message}\n` : ''}${USAGE}\n`);
      return EXIT.usage;
    }
    throw err;
  }
  const api = new Api(o);
  const deadline = Date.now() + o.timeoutMs;
  const stop = new AbortController();
  let interrupted: string | null = null;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      interrupted = sig;
      stop.abort();
    });
  }
  const progress = new Progress(started.getTime());
  let run: RunAnswer | null = null;
  let outcome: string;
  let note: string | null = null;

  /** A call retried on network errors, 5xx and 429 until `until`; other answers are returned. */
  const persistent = async (what: string, until: number, fn: () => Promise<Answer>): Promise<Answer> => {
    const backoff = new Backoff();
    for (;;) {
      let a: Answer | null = null;
      let failure: string;
      try {
        a = await fn();
        if (!transient(a.status)) return a;
        failure = errorText(a);
      } catch (err) {
        failure = (err as Error).message;
      }
      if (stop.signal.aborted) throw new Lost(`interrupted by ${interrupted}`);
      const wait = backoff.next(a?.retryAfterMs ?? null);
      if (Date.now() + wait > until) throw new Lost(`${what}: gave up after ${failure}`);
      process.stderr.write(`testrun: ${what}: ${failure}; retrying in ${(wait / 1000).toFixed(1)} s\n`);
      await sleep(wait, stop.signal);
    }
  };

  try {
    let runId = o.runId;
    if (!runId) {
      const body = { ...(o.cases ? { cases: o.cases } : {}), ...(o.tags ? { tags: o.tags } : {}), ...(o.configuration ? { configuration_id: o.configuration } : {}), ...(o.configJson ? { configuration: o.configJson } : {}), ...(o.label ? { label: o.label } : {}) };
      // The same Idempotency-Key on every retry: a lost answer never creates a second run.
      const created = await persistent('create run', Math.min(deadline, Date.now() + 120_000), () =>
        api.call('POST', `/api/projects/${encodeURIComponent(o.project)}/runs`, body, { 'idempotency-key': o.idempotencyKey }),
      ).catch((err) => {
        throw err instanceof Lost ? new Unusable(err.message) : err;
      });
      if (created.status !== 201 && created.status !== 200) throw new Unusable(`create run: ${errorText(created)}`);
      run = usableRun(created);
      runId = run.id;
      process.stderr.write(`testrun: created run ${runId}\n`);
      const executed = await persistent('execute run', Math.min(deadline, Date.now() + 120_000), () => api.call('POST', `/api/runs/${runId}/execute`));
      if (executed.status === 202) run = usableRun(executed);
      else if (executed.status !== 409) throw new Unusable(`execute run: ${errorText(executed)}`);
    }

    // Poll until final. A run that is not final is never success, however the wait ends.
    const backoff = new Backoff();
    for (;;) {
      const a = await persistent('read run', deadline, () => api.call('GET', `/api/runs/${runId}`));
      if (a.status === 404) throw new Lost(`run ${runId} is not found any more (${errorText(a)})`);
      if (a.status !== 200) throw new Unusable(`read run: ${errorText(a)}`);
      run = usableRun(a);
      progress.show(run);
      if (run.final) break;
      const wait = backoff.next(a.retryAfterMs);
      if (stop.signal.aborted) throw new Lost(`interrupted by ${interrupted}`);
      if (Date.now() + wait > deadline) throw new Lost(`no terminal result within --timeout ${o.timeoutMs / 1000} s`);
      await sleep(wait, stop.signal);
    }
    outcome = run.status;
  } catch (err) {
    if (err instanceof Lost) {
      outcome = 'lost';
      note = err.message;
      // Nobody waits for it any more: stop it (best effort) rather than let it run on.
      if (run && !run.final) {
        const id = run.id;
        await api.call('POST', `/api/runs/${id}/cancel`).then(
          (a) => process.stderr.write(`testrun: cancel of run ${id}: HTTP ${a.status}\n`),
          () => undefined,
        );
      }
    } else if (err instanceof Unusable) {
      outcome = 'error';
      note = err.message;
    } else {
      outcome = 'error';
      note = `unexpected: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  progress.end();

  const code = exitCodeFor(outcome);
  if (o.junit) fs.writeFileSync(o.junit, junitXml(o.project, run, outcome, note));
  if (o.json) fs.writeFileSync(o.json, jsonReport({ project: o.project, baseUrl: o.baseUrl, run, outcome, exitCode: code, note, startedAt: started }));
  for (const c of run?.cases ?? []) {
    if (c.status !== 'passed') process.stderr.write(`  ${c.status.padEnd(8)} ${c.name}: ${c.reasons.join('; ') || '(no result)'}\n`);
  }
  process.stderr.write(`testrun: ${outcome}${note ? ` — ${note}` : ''} (exit ${code})\n`);
  process.stdout.write(JSON.stringify({ run_id: run?.id ?? null, outcome, status: run?.status ?? null, exit_code: code, counts: run?.counts ?? null, note }) + '\n');
  return code;
}

if (require.main === module) {
  main(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`testrun: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(EXIT.error);
    },
  );
}
