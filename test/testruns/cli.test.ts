import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseOptions } from '../../admin/testrun-cli';
import { UsageError } from '../../platform/cli-args';
import { freePort } from '../setup/root-hooks';
import { useStack } from '../helpers/stack';
import { chatCase, newProject, startTestRunWorker, type TestProject, type TestRunWorker } from '../helpers/testruns';

// The CI CLI (admin/testrun-cli.ts) as a real process: exit codes, reports, polling.

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** the last stdout line, parsed */
  summary: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

function testrun(args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
    execFile(TSX, ['admin/testrun-cli.ts', ...args], { cwd: ROOT, env: childEnv, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      let summary: unknown;
      try {
        summary = JSON.parse(stdout.trim().split('\n').pop() ?? '');
      } catch {
        summary = undefined;
      }
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr, summary });
    });
  });
}

const attr = (xml: string, name: string) => xml.match(new RegExp(`<testsuite [^>]*${name}="(\\d+)"`))?.[1];

describe('test runs: the CI CLI (npm run testrun)', function () {
  this.timeout(90_000);
  const stack = useStack();
  let worker: TestRunWorker;
  let p: TestProject;
  let tmp: string;
  let closedPort: number;
  const out = (name: string) => path.join(tmp, name);
  const env = () => ({ TESTRUN_TOKEN: p.token, TESTRUN_BASE_URL: stack.gateway.url });

  before(async function () {
    worker = await startTestRunWorker({ gatewayUrl: stack.gateway.url });
    closedPort = await freePort();
    p = await newProject({
      taskQueue: worker.taskQueue,
      cases: [
        chatCase('ok-1', 'first & <fine> [sim tokens=3]', { assertions: { contains: 'first' }, tags: ['smoke'] }),
        chatCase('ok-2', 'second [sim tokens=3]', { assertions: { contains: 'second' }, tags: ['smoke'] }),
        chatCase('broken', 'breaks [sim status=500]', { tags: ['bad'] }),
        chatCase('slow', 'slow [sim latency=4000 tokens=2]'),
        chatCase('unreachable', 'x', { request: { dialect: 'chat', base_url: `http://127.0.0.1:${closedPort}`, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'x' }] } } }),
      ],
    });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'testrun-cli-'));
  });

  after(async function () {
    await worker?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('passed: exit 0 with a progress line, a JUnit report and a JSON report', async function () {
    const r = await testrun(['--project', p.id, '--tags', 'smoke', '--wait', '--junit', out('pass.xml'), '--json', out('pass.json')], env());
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /run [0-9a-f-]{36} passed · 2\/2 done · 2 passed, 0 failed/, 'the progress line reports the run passed, 2 of 2 done');
    assert.equal(r.summary.outcome, 'passed', 'the summary line says passed');
    const xml = fs.readFileSync(out('pass.xml'), 'utf8');
    assert.equal(attr(xml, 'tests'), '2', 'the JUnit report holds the two smoke cases');
    assert.equal(attr(xml, 'failures'), '0', 'the JUnit report has no failures');
    assert.equal(attr(xml, 'errors'), '0', 'the JUnit report has no errors');
    assert.match(xml, /<testcase name="ok-1" classname="[^"]+" time="[\d.]+"><\/testcase>/, 'a passed case is an empty testcase with its class and time');
    const json = JSON.parse(fs.readFileSync(out('pass.json'), 'utf8'));
    assert.equal(json.exit_code, 0, 'the JSON report carries exit code 0');
    assert.equal(json.run.status, 'passed', 'the JSON report carries the run as passed');
    assert.equal(json.run.counts.passed, 2, 'the JSON report counts both cases passed');
  });

  it('failed: exit 1, the failing case and its reason in JUnit', async function () {
    const r = await testrun(['--project', p.name, '--cases', 'ok-1,broken', '--wait', '--junit', out('fail.xml'), '--json', out('fail.json'), '--token', p.token], { TESTRUN_BASE_URL: stack.gateway.url });
    assert.equal(r.code, 1, r.stderr);
    const xml = fs.readFileSync(out('fail.xml'), 'utf8');
    assert.equal(attr(xml, 'tests'), '2', 'the JUnit report holds the two chosen cases');
    assert.equal(attr(xml, 'failures'), '1', 'the JUnit report has the one broken case failed');
    assert.match(xml, /<testcase name="broken"[^>]*><failure message="status: expected 2xx, got 5\d\d/, 'the broken case\'s failure gives its reason (a 5xx status)');
    assert.match(r.stderr, /failed\s+broken: status: expected 2xx/, 'the progress output names the failed case and its reason');
    assert.equal(JSON.parse(fs.readFileSync(out('fail.json'), 'utf8')).outcome, 'failed', 'the JSON report says failed');
  });

  it('timed_out: exit 3, the run error and the cases not run in JUnit', async function () {
    const r = await testrun(['--project', p.id, '--cases', 'ok-1,slow', '--config-json', '{"deadline_seconds":1,"concurrency":1,"heartbeat_timeout_seconds":1}', '--wait', '--junit', out('late.xml')], env());
    assert.equal(r.code, 3, r.stderr);
    assert.equal(r.summary.outcome, 'timed_out', 'the summary line says timed_out');
    const xml = fs.readFileSync(out('late.xml'), 'utf8');
    assert.match(xml, /<testcase name="slow"[^>]*><skipped message="not run: the run deadline/, 'the case the deadline cut off is skipped as not run');
    assert.match(xml, /<testcase name="\(run\)"[^>]*><error message="run timed_out/, 'the run\'s time-out is an error of a (run) testcase');
  });

  it('error: exit 2 for a run in error and for an answer it cannot use', async function () {
    const errored = await testrun(['--project', p.id, '--cases', 'unreachable', '--config-json', JSON.stringify({ allowed_hosts: [`127.0.0.1:${closedPort}`], max_attempts: 1 }), '--wait'], env());
    assert.equal(errored.code, 2, errored.stderr);
    assert.equal(errored.summary.outcome, 'error', 'the summary line says error for a run in error');
    const badToken = await testrun(['--project', p.id, '--cases', 'ok-1', '--wait', '--json', out('badtoken.json')], { ...env(), TESTRUN_TOKEN: `trk_${'x'.repeat(43)}` });
    assert.equal(badToken.code, 2, badToken.stderr);
    assert.match(badToken.stderr, /401 invalid_ci_token/, `the CLI reports the refused token: ${badToken.stderr}`);
    assert.equal(JSON.parse(fs.readFileSync(out('badtoken.json'), 'utf8')).exit_code, 2, 'the JSON report carries exit code 2 for the refused token');
  });

  it('wrong usage: exit 4', async function () {
    for (const [args, extra] of [
      [['--project', p.id, '--wait'], {}],
      [['--project', p.id, '--cases', 'ok-1'], { TESTRUN_TOKEN: undefined }],
    ] as Array<[string[], Record<string, string | undefined>]>) {
      const r = await testrun(args, { ...env(), ...extra });
      assert.equal(r.code, 4, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /usage: npm run -s testrun/, `a usage error prints the usage: ${r.stderr}`);
    }
    // The same parser, in process, for the other mistakes.
    for (const args of [[], ['--project', p.id, '--cases', 'ok-1', '--bogus'], ['--project', p.id, '--cases', 'ok-1', '--timeout', 'soon'], ['--project', p.id, '--tags', 'a', 'stray'], ['--project', p.id, '--cases', 'ok-1', '--config-json', '[1]'], ['--project', p.id, '--cases', 'ok-1', '--base-url', 'ftp://x'], ['--help']]) {
      assert.throws(() => parseOptions(args, { TESTRUN_TOKEN: 't' }), UsageError, args.join(' '));
    }
    assert.equal(parseOptions(['--project', 'p', '--cases', 'a,b', '--wait'], { TESTRUN_TOKEN: 't' }).cases?.length, 2, '--cases is split at commas');
  });

  describe('against a scripted server', function () {
    let server: http.Server;
    let base: string;
    let script: (req: http.IncomingMessage, res: http.ServerResponse, n: number) => void;
    const seen: Array<{ method: string; url: string; at: number }> = [];

    before(async function () {
      server = http.createServer((req, res) => {
        seen.push({ method: req.method!, url: req.url!, at: Date.now() });
        req.resume();
        req.on('end', () => script(req, res, seen.filter((s) => s.url === req.url && s.method === req.method).length));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));
    beforeEach(() => (seen.length = 0));

    const run = (status: string, final: boolean, casesStatus = 'passed') => ({
      id: '11111111-1111-4111-8111-111111111111',
      status,
      final,
      counts: { total: 1, passed: casesStatus === 'passed' ? 1 : 0, failed: 0, errored: 0, not_run: 0, pending: casesStatus === 'pending' ? 1 : 0 },
      cases: [{ case_id: 'c', name: 'case', status: casesStatus, reasons: [] }],
    });
    const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/html' : 'application/json', ...headers });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    const cli = (...extra: string[]) => testrun(['--project', 'p', '--cases', 'case', '--wait', '--base-url', base, '--token', 't', ...extra]);

    it('honours Retry-After while polling, and retries creation with the same Idempotency-Key', async function () {
      const keys: string[] = [];
      script = (req, res, n) => {
        if (req.url === '/api/projects/p/runs') {
          keys.push(String(req.headers['idempotency-key']));
          return n === 1 ? send(res, 503, { error: { code: 'service_unavailable', message: 'busy' } }) : send(res, 201, run('created', false, 'pending'));
        }
        if (req.url?.endsWith('/execute')) return send(res, 202, run('queued', false, 'pending'));
        return n === 1 ? send(res, 429, { error: { code: 'rate_limit_exceeded', message: 'slow down' } }, { 'retry-after': '2' }) : send(res, 200, run('passed', true));
      };
      const r = await cli();
      assert.equal(r.code, 0, r.stderr);
      assert.equal(keys.length, 2, 'the creation refused with 503 was retried once');
      assert.equal(keys[0], keys[1], 'a retried creation cannot make a second run');
      const polls = seen.filter((s) => s.method === 'GET');
      assert.equal(polls.length, 2, 'the poll answered with 429 was retried once');
      assert.ok(polls[1].at - polls[0].at >= 1900, `waited for Retry-After (${polls[1].at - polls[0].at} ms)`);
    });

    it('a run that disappears is lost sight of: exit 3', async function () {
      script = (req, res) => {
        if (req.url === '/api/projects/p/runs') return send(res, 201, run('created', false, 'pending'));
        if (req.url?.endsWith('/execute')) return send(res, 202, run('queued', false, 'pending'));
        return send(res, 404, { error: { code: 'not_found', message: 'gone' } });
      };
      const r = await cli('--junit', out('lost.xml'));
      assert.equal(r.code, 3, r.stderr);
      assert.equal(r.summary.outcome, 'lost', 'the summary line says lost for a run that disappeared');
      assert.match(fs.readFileSync(out('lost.xml'), 'utf8'), /<error message="run lost/, 'the JUnit report has a run lost error');
    });

    it('a run never final within --timeout: exit 3, and it is canceled', async function () {
      script = (req, res) => {
        if (req.url === '/api/projects/p/runs') return send(res, 201, run('created', false, 'pending'));
        if (req.url?.endsWith('/execute')) return send(res, 202, run('queued', false, 'pending'));
        if (req.url?.endsWith('/cancel')) return send(res, 202, run('canceled', true, 'not_run'));
        return send(res, 200, run('running', false, 'pending'));
      };
      const r = await cli('--timeout', '1');
      assert.equal(r.code, 3, r.stderr);
      assert.ok(seen.some((s) => s.method === 'POST' && s.url.endsWith('/cancel')), 'the abandoned run is canceled');
    });

    it('an answer that is not a run, or a pass that does not add up: exit 2', async function () {
      script = (req, res) => {
        if (req.url === '/api/projects/p/runs') return send(res, 201, run('created', false, 'pending'));
        if (req.url?.endsWith('/execute')) return send(res, 202, run('queued', false, 'pending'));
        return send(res, 200, '<html>login</html>');
      };
      assert.equal((await cli()).code, 2, 'an HTML answer instead of a run exits 2');
      script = (req, res) => {
        if (req.url === '/api/projects/p/runs') return send(res, 201, run('created', false, 'pending'));
        if (req.url?.endsWith('/execute')) return send(res, 202, run('queued', false, 'pending'));
        return send(res, 200, run('passed', true, 'not_run'));
      };
      const r = await cli();
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /says passed but/, `the CLI says the pass does not add up: ${r.stderr}`);
    });
  });
});
