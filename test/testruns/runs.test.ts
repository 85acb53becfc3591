import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { request } from 'undici';
import { createCiToken, revokeCiToken } from '../../services/testruns/projects';
import { SA } from '../../domain/shared/search-attributes';
import { freePort } from '../setup/root-hooks';
import { env } from '../setup/env';
import { call, newAccount, useStack } from '../helpers/stack';
import { chatCase, maxOverlap, newProject, SEALING_KEY_HEX, SEALING_SECRET, searchStatus, startRun, startTestRunWorker, waitRun, type TestProject, type TestRunWorker } from '../helpers/testruns';

// Test runs (spec 3 B, README "Test runs"): the API, the workflow, both gates, cancel, deadline,
// a killed worker, token isolation, and the operator commands, on the real gateway and simulator.

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

async function intervals(runIds: string[]) {
  const rows = await env.db('test_case_results').whereIn('run_id', runIds).select('started_at', 'finished_at', 'status');
  for (const r of rows) assert.ok(r.started_at && r.finished_at, `every case executed: ${JSON.stringify(r)}`);
  return rows.map((r) => ({ start: r.started_at.getTime(), end: r.finished_at.getTime() }));
}

describe('test runs (CI release gate)', function () {
  this.timeout(60_000);
  const stack = useStack();
  let worker: TestRunWorker;
  const base = () => stack.gateway.url;

  before(async function () {
    worker = await startTestRunWorker({ gatewayUrl: stack.gateway.url });
  });

  after(async function () {
    await worker?.stop();
  });

  describe('lifecycle', function () {
    let p: TestProject;
    const FAST = { case_timeout_seconds: 10, deadline_seconds: 60, heartbeat_timeout_seconds: 2 };

    before(async function () {
      p = await newProject({ taskQueue: worker.taskQueue });
    });

    it('manages cases and configurations through the API, and a run of passing cases in every dialect passes', async function () {
      const cases = [
        chatCase('greet', 'hello world [sim tokens=3]', {
          assertions: { status: 200, contains: 'hello', not_contains: ['goodbye'], regex: '^Echo:', max_latency_ms: 10_000, max_cost: '1' },
          tags: ['smoke'],
        }),
        {
          name: 'weather-tool',
          request: {
            dialect: 'messages' as const,
            body: {
              model: 'sim-claude',
              max_tokens: 100,
              messages: [{ role: 'user', content: 'Paris weather [sim tool_call=get_weather]' }],
              tools: [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { input: { type: 'string' } } } }],
            },
          },
          assertions: { tool_call: 'get_weather', json_schema: { type: 'object', required: ['input'], properties: { input: { type: 'string', pattern: 'Paris' } } } },
          tags: ['smoke'],
        },
        { name: 'responses', request: { dialect: 'responses' as const, body: { model: 'sim-gpt', input: 'release gate [sim tokens=4]' } }, assertions: { contains: ['release'] }, tags: ['smoke'] },
        {
          name: 'streamed',
          request: { dialect: 'chat' as const, body: { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: 'streaming works [sim tokens=4]' }] } },
          assertions: { contains: 'streaming', max_cost: '1' },
          tags: ['smoke'],
        },
        chatCase('broken', 'fail please [sim status=500]', { tags: ['regression'] }),
      ];
      for (const c of cases) {
        const r = await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: c });
        assert.equal(r.status, 201, r.text);
        assert.equal(r.json.name, c.name, `the created case keeps its name ${c.name}`);
      }
      const dup = await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: cases[0] });
      assert.equal(dup.status, 409, dup.text);
      assert.equal(dup.json.error.code, 'conflict', 'a duplicate case name is a conflict');
      const bad = await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: { ...cases[0], name: 'bad', assertions: { regex: '([' } } });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json.error.param, 'assertions.regex', 'an invalid regex is refused naming assertions.regex');
      const smoke = await call(base(), `/api/projects/${p.name}/cases?tag=smoke`, { key: p.token });
      assert.deepEqual(smoke.json.data.map((c: { name: string }) => c.name).sort(), ['greet', 'responses', 'streamed', 'weather-tool'], 'the smoke tag selects the four smoke cases, by project name too');
      const replaced = await call(base(), `/api/projects/${p.id}/cases/broken`, { key: p.token, method: 'PUT', body: { ...cases[4], description: 'fails on purpose' } });
      assert.equal(replaced.status, 200, replaced.text);
      assert.equal(replaced.json.description, 'fails on purpose', "PUT replaces the case's description");
      const temp = await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: chatCase('temporary', 'x', { tags: ['smoke'] }) });
      const archived = await call(base(), `/api/projects/${p.id}/cases/${temp.json.id}`, { key: p.token, method: 'DELETE' });
      assert.equal(archived.status, 200, archived.text);
      assert.ok(archived.json.archived_at, 'archived, not selectable any more');
      const cfg = await call(base(), `/api/projects/${p.id}/configurations`, { key: p.token, body: { name: 'fast', settings: FAST } });
      assert.equal(cfg.status, 201, cfg.text);

      // Creation, with Idempotency-Key: the same body (in any key order) is the same run; another body is 409.
      const body = { tags: ['smoke'], configuration_id: 'fast', configuration: { concurrency: 2 } };
      const key = randomUUID();
      const created = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body, headers: { 'idempotency-key': key } });
      assert.equal(created.status, 201, created.text);
      const run = created.json;
      assert.equal(run.status, 'created', 'a new run is created, not yet queued');
      assert.equal(run.final, false, 'a created run is not final');
      assert.deepEqual(run.counts, { total: 4, passed: 0, failed: 0, errored: 0, not_run: 0, pending: 4 }, 'the smoke tag selects four pending cases');
      assert.equal(run.configuration.case_timeout_seconds, 10, 'the named configuration sets the case timeout');
      assert.equal(run.configuration.concurrency, 2, 'the inline configuration overrides the concurrency');
      assert.equal(run.configuration.max_attempts, 3, 'defaults fill the snapshot');
      const again = await call(base(), `/api/projects/${p.id}/runs`, {
        key: p.token,
        body: { configuration: { concurrency: 2 }, configuration_id: 'fast', tags: ['smoke'] },
        headers: { 'idempotency-key': key },
      });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.json.id, run.id, 'the same Idempotency-Key and body give the same run');
      assert.equal(again.headers.get('idempotent-replayed'), 'true', `the replay is marked Idempotent-Replayed: ${again.text}`);
      const other = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body: { tags: ['regression'] }, headers: { 'idempotency-key': key } });
      assert.equal(other.status, 409, other.text);
      assert.equal(other.json.error.code, 'idempotency_key_reused', 'another body with the same Idempotency-Key is refused');

      // Execute: 202 with the run queued; repeating it starts nothing new.
      const exec = await call(base(), `/api/runs/${run.id}/execute`, { key: p.token, method: 'POST' });
      assert.equal(exec.status, 202, exec.text);
      assert.equal(exec.json.status, 'queued', 'an executed run is queued');
      assert.equal(exec.json.final, false, 'a queued run is not final');
      const exec2 = await call(base(), `/api/runs/${run.id}/execute`, { key: p.token, method: 'POST' });
      assert.equal(exec2.status, 202, exec2.text);

      const done = await waitRun(base(), p.token, run.id);
      assert.equal(done.status, 'passed', JSON.stringify(done, null, 1));
      assert.equal(done.final, true, 'a passed run is final');
      assert.deepEqual(done.counts, { total: 4, passed: 4, failed: 0, errored: 0, not_run: 0, pending: 0 }, 'all four cases passed');
      for (const c of done.cases) {
        assert.equal(c.status, 'passed', JSON.stringify(c));
        assert.deepEqual(c.reasons, [], `a passing case has no reasons: ${JSON.stringify(c)}`);
        assert.equal(c.http_status, 200, `the case was answered with 200: ${JSON.stringify(c)}`);
        assert.equal(c.attempts, 1, `a passing case took one attempt: ${JSON.stringify(c)}`);
        assert.equal(typeof c.latency_ms, 'number', "the case's latency is measured");
        assert.ok(c.gateway_request_id, 'the gateway request id is kept for support');
      }
      const byName = Object.fromEntries(done.cases.map((c: { name: string }) => [c.name, c]));
      assert.ok(Number(byName.greet.cost) > 0, 'non-streaming cost from x-gateway-cost');
      assert.ok(Number(byName.streamed.cost) > 0, 'streamed cost from the settled reservation');
      assert.match(byName['weather-tool'].output, /get_weather/, `the tool case's output shows the tool call: ${byName['weather-tool'].output}`);
      const t = done.timestamps;
      assert.ok(t.created_at <= t.queued_at && t.queued_at <= t.running_at && t.running_at <= t.finished_at, JSON.stringify(t));
      assert.equal(t.gated_at, null, 'the gates had room: never gated');
      const rows = await env.db('test_case_results').where({ run_id: run.id }).count<{ count: string }[]>('* as count');
      assert.equal(Number(rows[0].count), 4, 'one result row per case');

      // Visible and searchable in Temporal: ProjectId and Status, a memo for humans.
      const handle = stack.temporal.workflow.getHandle(done.workflow_id);
      const d = await handle.describe();
      assert.equal(d.typedSearchAttributes.get(SA.ProjectId), p.id, 'the workflow carries the ProjectId search attribute');
      assert.equal(await searchStatus(stack.temporal, done.workflow_id, 'passed'), 'passed', "the workflow's Status search attribute is passed");
      assert.equal((d.memo as { project: string }).project, p.name, "the workflow's memo names the project");
      let found: string[] = [];
      for (let i = 0; i < 50 && found.length === 0; i++) {
        found = [];
        for await (const w of stack.temporal.workflow.list({ query: `ProjectId = "${p.id}" AND \`Status\` = "passed"` })) found.push(w.workflowId);
        if (found.length === 0) await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(found, [done.workflow_id], 'a visibility query by ProjectId and Status finds the run');

      // The workflow code replays its own history deterministically.
      await Worker.runReplayHistory({ workflowBundle: env.bundles.testruns }, await handle.fetchHistory(), done.workflow_id);
    });

    it('fails a run whose case fails, with reasons; assertion failures are not retried', async function () {
      await call(base(), `/api/projects/${p.id}/cases`, {
        key: p.token,
        body: chatCase('needs-city', 'Paris [sim tool_call=get_weather]', {
          request: {
            dialect: 'chat',
            body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'Paris [sim tool_call=get_weather]' }], tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }] },
          },
          assertions: { json_schema: { type: 'object', required: ['city'] } },
        }),
      });
      await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: chatCase('wrong-words', 'hello there [sim tokens=3]', { assertions: { contains: 'goodbye', regex: 'bye$' } }) });
      const id = await startRun(base(), p, { cases: ['greet', 'broken', 'needs-city', 'wrong-words'], configuration_id: 'fast' });
      const done = await waitRun(base(), p.token, id);
      assert.equal(done.status, 'failed', JSON.stringify(done, null, 1));
      assert.deepEqual(done.counts, { total: 4, passed: 1, failed: 3, errored: 0, not_run: 0, pending: 0 }, 'one of four cases passed, three failed');
      const byName = Object.fromEntries(done.cases.map((c: { name: string }) => [c.name, c]));
      assert.equal(byName.greet.status, 'passed', 'the passing case still passes in a failed run');
      assert.match(byName.broken.reasons[0], /^status: expected 2xx, got 5\d\d/, `the 500 case says the status was wrong: ${byName.broken.reasons[0]}`);
      assert.match(byName['needs-city'].reasons[0], /^json_schema: .*city/, `the schema case says which field is missing: ${byName['needs-city'].reasons[0]}`);
      assert.equal(byName['wrong-words'].reasons.length, 2, `both failed assertions are reported: ${JSON.stringify(byName['wrong-words'].reasons)}`);
      assert.match(byName['wrong-words'].reasons[0], /^contains: "goodbye" not found/, 'the contains assertion names the missing text');
      assert.match(byName['wrong-words'].reasons[1], /^regex: \/bye\$\//, 'the regex assertion names the pattern');
      for (const name of ['broken', 'needs-city', 'wrong-words']) assert.equal(byName[name].attempts, 1, `${name}: a failed assertion is not retried`);
    });

    it('retries infrastructure errors, then reports the case errored and the run error', async function () {
      const closed = await freePort(); // nothing listens here
      await call(base(), `/api/projects/${p.id}/cases`, {
        key: p.token,
        body: chatCase('unreachable', 'hello', { request: { dialect: 'chat', base_url: `http://127.0.0.1:${closed}`, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hello' }] } } }),
      });
      const id = await startRun(base(), p, { cases: ['greet', 'unreachable'], configuration: { ...FAST, max_attempts: 2, allowed_hosts: [`127.0.0.1:${closed}`] } });
      const done = await waitRun(base(), p.token, id);
      assert.equal(done.status, 'error', JSON.stringify(done, null, 1));
      assert.deepEqual(done.counts, { total: 2, passed: 1, failed: 0, errored: 1, not_run: 0, pending: 0 }, 'the unreachable case errored, the other passed');
      const c = done.cases.find((x: { name: string }) => x.name === 'unreachable');
      assert.equal(c.attempts, 2, 'retried up to max_attempts');
      assert.match(c.reasons[0], /^infrastructure error after every attempt: .*ECONNREFUSED/, `the errored case says the connection was refused: ${c.reasons[0]}`);
      assert.ok(done.reason, `the run's failure has a reason: ${JSON.stringify(done)}`);
    });

    it('a case past its own timeout fails, without a retry', async function () {
      await call(base(), `/api/projects/${p.id}/cases`, { key: p.token, body: chatCase('too-slow', 'wait [sim latency=3000 tokens=2]') });
      const t0 = Date.now();
      const id = await startRun(base(), p, { cases: ['too-slow'], configuration: { ...FAST, case_timeout_seconds: 0.5 } });
      const done = await waitRun(base(), p.token, id);
      assert.ok(Date.now() - t0 < 2500, `the case stopped at its timeout (${Date.now() - t0} ms)`);
      assert.equal(done.status, 'failed', `a case past its timeout fails the run: ${JSON.stringify(done)}`);
      assert.match(done.cases[0].reasons[0], /no complete answer within the case timeout of 500 ms/, `the reason names the case timeout: ${done.cases[0].reasons[0]}`);
      assert.equal(done.cases[0].attempts, 1, 'a timed-out case is not retried');
    });

    it('finishes a run whose workflow ended without it (terminated): a poller never waits forever', async function () {
      const id = await startRun(base(), p, { cases: ['too-slow'], configuration: FAST });
      await waitRun(base(), p.token, id, { until: (r) => r.status === 'running' });
      await stack.temporal.workflow.getHandle(`test-run-${id}`).terminate('operator');
      const done = await waitRun(base(), p.token, id, { timeoutMs: 5000 });
      assert.equal(done.status, 'canceled', 'a terminated workflow makes the run canceled');
      assert.match(done.reason, /terminated/, `the reason says the workflow was terminated: ${done.reason}`);
      assert.equal(done.counts.not_run, 1, 'the case never finished is not run');
      assert.equal((await env.db('test_case_leases').where({ run_id: id })).length, 0, 'its gate slot is freed at once');
    });

    it('rejects a selection that matches nothing and unknown cases', async function () {
      const none = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body: { tags: ['no-such-tag'] } });
      assert.equal(none.status, 400, `a tag matching no case is refused: ${none.text}`);
      assert.equal(none.json.error.code, 'no_cases_selected', 'the refusal says no cases were selected');
      const unknown = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body: { cases: ['greet', 'nope'] } });
      assert.equal(unknown.status, 400, `an unknown case name is refused: ${unknown.text}`);
      assert.equal(unknown.json.error.param, 'cases', 'the refusal names the cases field');
      assert.match(unknown.json.error.message, /"nope"/, 'the refusal names the unknown case');
      const neither = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body: {} });
      assert.equal(neither.status, 400, `a run with neither cases nor tags is refused: ${neither.text}`);
    });
  });

  describe('gates under parallel runs', function () {
    it('network gate: a case reaches only this gateway and allowed hosts; the project key never leaves the gateway', async function () {
      const marker = `netgate-${randomUUID()}`;
      const sim = new URL(env.simulator.url);
      const p = await newProject({
        taskQueue: worker.taskQueue,
        cases: [
          chatCase('via-gateway', 'hello gate [sim tokens=3]', { assertions: { contains: 'hello' } }),
          {
            name: 'direct',
            request: { dialect: 'chat', base_url: env.simulator.url, body: { model: 'sim-gpt', messages: [{ role: 'user', content: `${marker} [sim tokens=2]` }] } },
            assertions: { contains: marker },
          },
          {
            name: 'image',
            request: {
              dialect: 'chat',
              body: { model: 'sim-gpt', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, { type: 'image_url', image_url: { url: 'http://images.invalid/cat.png' } }] }] },
            },
          },
        ],
      });
      const [closedRun, openRun] = await Promise.all([
        startRun(base(), p, { cases: ['via-gateway', 'direct', 'image'] }),
        startRun(base(), p, { cases: ['via-gateway', 'direct', 'image'], configuration: { allowed_hosts: [sim.host] } }),
      ]);
      const [closed, open] = await Promise.all([waitRun(base(), p.token, closedRun), waitRun(base(), p.token, openRun)]);
      type CaseView = { name: string; status: string; reasons: string[] };
      const by = (run: { cases: CaseView[] }): Record<string, CaseView> => Object.fromEntries(run.cases.map((c) => [c.name, c]));

      assert.equal(by(closed)['via-gateway'].status, 'passed', 'the gateway is always allowed');
      assert.equal(by(closed).direct.status, 'failed', 'the direct case is refused without an allowed host');
      assert.match(by(closed).direct.reasons[0], new RegExp(`^network gate: target http://${sim.host} is not an allowed host`), `the refusal names the target host: ${by(closed).direct.reasons[0]}`);
      assert.equal(by(closed).image.status, 'failed', 'the case with an image URL is refused');
      assert.match(by(closed).image.reasons[0], /^network gate: URL in the request body http:\/\/images\.invalid is not an allowed host/, `the refusal names the URL in the body: ${by(closed).image.reasons[0]}`);
      assert.equal(closed.status, 'failed', 'a run with refused cases fails');

      assert.equal(by(open).direct.status, 'passed', JSON.stringify(by(open).direct));
      assert.equal(by(open).image.status, 'failed', 'images.invalid is allowed in neither run');
      assert.equal(open.status, 'failed', 'the run with images.invalid refused fails');

      // Only the allowed run reached the simulator directly, and without the project's key.
      const stats = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ body: unknown; key: unknown }> };
      const direct = stats.last_requests.filter((r: { body: unknown }) => JSON.stringify(r.body).includes(marker));
      assert.equal(direct.length, 1, 'one direct request: the refused one never connected');
      assert.ok(!direct[0].key, `no credentials sent to another host: ${JSON.stringify(direct[0].key)}`);
    });

    it('concurrency gate per project: at concurrency 1, two parallel runs never execute two cases at once; the waiting run is gated', async function () {
      const p = await newProject({
        taskQueue: worker.taskQueue,
        maxConcurrency: 1,
        cases: [chatCase('slow-1', 'one [sim latency=300 tokens=2]'), chatCase('slow-2', 'two [sim latency=300 tokens=2]')],
      });
      const body = { cases: ['slow-1', 'slow-2'], configuration: { concurrency: 2 } };
      const runs = await Promise.all([startRun(base(), p, body), startRun(base(), p, body)]);
      const seen = new Set<string>();
      const done = await Promise.all(runs.map((id) => waitRun(base(), p.token, id, { until: (r) => (seen.add(r.status), r.final) })));
      for (const r of done) assert.equal(r.status, 'passed', JSON.stringify(r));
      assert.equal(maxOverlap(await intervals(runs)), 1, 'one case at a time for this project');
      assert.ok(seen.has('gated'), `a run waiting at the gate says so (seen: ${[...seen].join(', ')})`);
      assert.ok(done.some((r) => r.timestamps.gated_at !== null), 'gated_at recorded');
      assert.equal(Number((await env.db('test_case_leases').whereIn('run_id', runs).count<{ c: string }[]>('* as c'))[0].c), 0, 'slots released');
    });

    it('global concurrency gate: at most N cases at once over every project and worker', async function () {
      const live = await env.db('test_case_leases').where('expires_at', '>', env.db.fn.now());
      assert.equal(live.length, 0, `no slot is taken before this test: ${JSON.stringify(live)}`);
      const gated = await startTestRunWorker({ gatewayUrl: stack.gateway.url, globalConcurrency: 2 });
      try {
        const cases = [1, 2, 3].map((i) => chatCase(`slow-${i}`, `case ${i} [sim latency=300 tokens=2]`));
        const [a, b] = await Promise.all([1, 2].map(() => newProject({ taskQueue: gated.taskQueue, maxConcurrency: 5, cases })));
        const body = { cases: ['slow-1', 'slow-2', 'slow-3'], configuration: { concurrency: 3 } };
        const runs = await Promise.all([startRun(base(), a, body), startRun(base(), b, body)]);
        const done = await Promise.all([waitRun(base(), a.token, runs[0]), waitRun(base(), b.token, runs[1])]);
        for (const r of done) assert.equal(r.status, 'passed', JSON.stringify(r));
        assert.equal(maxOverlap(await intervals(runs)), 2, 'the global limit (2), used but never exceeded');
      } finally {
        await gated.stop();
      }
    });
  });

  describe('cancel and deadline', function () {
    let p: TestProject;
    before(async function () {
      p = await newProject({
        taskQueue: worker.taskQueue,
        cases: [
          chatCase('fast', 'quick [sim tokens=2]'),
          chatCase('slow', 'slow [sim latency=4000 tokens=2]'),
          chatCase('slow-2', 'slow too [sim latency=4000 tokens=2]'),
          chatCase('fast-2', 'quick again [sim tokens=2]'),
        ],
      });
    });

    it('cancels a run that was never executed at once, and refuses to execute it afterwards', async function () {
      const created = await call(base(), `/api/projects/${p.id}/runs`, { key: p.token, body: { cases: ['fast'] } });
      const c = await call(base(), `/api/runs/${created.json.id}/cancel`, { key: p.token, method: 'POST' });
      assert.equal(c.status, 202, c.text);
      assert.equal(c.json.status, 'canceled', 'canceling a never-executed run ends it canceled');
      assert.equal(c.json.final, true, 'a canceled run is final');
      assert.deepEqual(c.json.counts, { total: 1, passed: 0, failed: 0, errored: 0, not_run: 1, pending: 0 }, 'the never-executed case is not run');
      const e = await call(base(), `/api/runs/${created.json.id}/execute`, { key: p.token, method: 'POST' });
      assert.equal(e.status, 409, `executing a canceled run is a conflict: ${e.text}`);
      assert.equal(e.json.error.code, 'run_already_final', 'the conflict says the run is already final');
      const again = await call(base(), `/api/runs/${created.json.id}/cancel`, { key: p.token, method: 'POST' });
      assert.equal(again.status, 202, 'cancel is idempotent');
    });

    it('cancels an executing run: the case in flight stops, the rest are not run', async function () {
      const id = await startRun(base(), p, { cases: ['slow', 'slow-2', 'fast'], configuration: { concurrency: 1, heartbeat_timeout_seconds: 1 } });
      await waitRun(base(), p.token, id, { until: (r) => r.status === 'running' });
      const t0 = Date.now();
      const c = await call(base(), `/api/runs/${id}/cancel`, { key: p.token, method: 'POST' });
      assert.equal(c.status, 202, c.text);
      assert.ok(c.json.timestamps.cancel_requested_at, `the cancel is timestamped: ${c.text}`);
      const done = await waitRun(base(), p.token, id);
      assert.ok(Date.now() - t0 < 3500, `canceled before the slow case could answer (${Date.now() - t0} ms)`);
      assert.equal(done.status, 'canceled', `the canceled run ends canceled: ${JSON.stringify(done)}`);
      assert.equal(done.final, true, 'a canceled run is final');
      assert.deepEqual(done.counts, { total: 3, passed: 0, failed: 0, errored: 0, not_run: 3, pending: 0 }, 'every case of the canceled run is not run');
      assert.match(done.cases[0].reasons[0], /canceled/, `the case in flight says it was canceled: ${done.cases[0].reasons[0]}`);
      assert.equal(await searchStatus(stack.temporal, done.workflow_id, 'canceled'), 'canceled', "the workflow's Status search attribute is canceled");
      const leases = await env.db('test_case_leases').where({ run_id: id });
      assert.equal(leases.length, 0, 'the gate slot is released');
      const late = await call(base(), `/api/runs/${id}/execute`, { key: p.token, method: 'POST' });
      assert.equal(late.status, 409, `executing a canceled run is a conflict: ${late.text}`);
    });

    it('ends a run at its deadline as timed_out, finished cases kept and the others not run', async function () {
      const t0 = Date.now();
      const id = await startRun(base(), p, { cases: ['fast', 'slow', 'fast-2'], configuration: { concurrency: 1, deadline_seconds: 1.5, heartbeat_timeout_seconds: 1 } });
      const done = await waitRun(base(), p.token, id);
      assert.ok(Date.now() - t0 < 3800, `ended at the deadline, not after the slow case (${Date.now() - t0} ms)`);
      assert.equal(done.status, 'timed_out', JSON.stringify(done, null, 1));
      assert.deepEqual(done.counts, { total: 3, passed: 1, failed: 0, errored: 0, not_run: 2, pending: 0 }, 'one case passed before the deadline, two not run');
      assert.equal(done.cases[0].status, 'passed', 'the case before the deadline passed');
      assert.match(done.cases[1].reasons[0], /deadline \(1\.5 s\)/, `the slow case says the deadline passed: ${done.cases[1].reasons[0]}`);
      assert.match(done.reason, /deadline/, `the run's reason names the deadline: ${done.reason}`);
    });

    it('enforces the deadline on time with the default heartbeat timeout; counts, reasons and status agree (issue 23 defect 5)', async function () {
      const t0 = Date.now();
      const id = await startRun(base(), p, { cases: ['fast', 'slow', 'slow-2'], configuration: { concurrency: 1, deadline_seconds: 1.5 } });
      const done = await waitRun(base(), p.token, id);
      const took = Date.now() - t0;
      assert.ok(took < 2800, `ended at the deadline (1.5 s), not seconds later: ${took} ms`);
      assert.equal(done.status, 'timed_out', JSON.stringify(done, null, 1));
      assert.deepEqual(done.counts, { total: 3, passed: 1, failed: 0, errored: 0, not_run: 2, pending: 0 }, 'one case passed before the deadline, two not run');
      assert.equal(done.cases[0].status, 'passed', 'the case before the deadline passed');
      for (const c of done.cases.slice(1)) {
        assert.equal(c.status, 'not_run', `a case after the deadline is not run: ${JSON.stringify(c)}`);
        assert.match(c.reasons[0], /deadline \(1\.5 s\) passed before this case finished/, `the case says the deadline passed before it finished: ${c.reasons[0]}`);
      }
      // The run's reason is about the run, and agrees with the counts.
      assert.equal(done.reason, 'the run deadline (1.5 s) passed: 1 of 3 cases finished, 2 not run', "the run's reason agrees with the counts");
    });
  });

  it('a worker killed mid-run: the run still finishes, every case reported once', async function () {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'testrun-kill-'));
    const bundle = path.join(tmp, 'workflows.js');
    fs.writeFileSync(bundle, env.bundles.testruns.code);
    const taskQueue = `testruns-kill-${randomUUID()}`;
    const p = await newProject({
      taskQueue,
      cases: [chatCase('a', 'first [sim tokens=2]'), chatCase('slow', 'slow one [sim latency=2000 tokens=2]'), chatCase('b', 'last [sim tokens=2]')],
    });
    // node itself (not the tsx wrapper, whose child would survive the kill).
    let child: ChildProcess | null = spawn(process.execPath, ['--require', 'tsx/cjs', 'test/helpers/testrun-worker-child.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: env.databaseUrl,
        TEMPORAL_ADDRESS: env.temporalAddress,
        TASK_QUEUE: taskQueue,
        GATEWAY_URL: stack.gateway.url,
        SEALING_KEY_HEX,
        BUNDLE_PATH: bundle,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let replacement: TestRunWorker | null = null;
    try {
      await new Promise<void>((resolve, reject) => {
        let err = '';
        child!.stderr!.on('data', (d) => (err += d));
        child!.stdout!.on('data', (d) => String(d).includes('ready') && resolve());
        child!.once('exit', (code) => reject(new Error(`worker child exited (${code}): ${err}`)));
      });
      const id = await startRun(base(), p, { cases: ['a', 'slow', 'b'], configuration: { concurrency: 1, heartbeat_timeout_seconds: 2, max_attempts: 3 } });
      // Kill the worker while the slow case is in flight on it.
      for (let i = 0; ; i++) {
        const row = await env.db('test_run_cases').where({ run_id: id, name: 'slow' }).first('attempts');
        if (row.attempts >= 1) break;
        if (i > 200) throw new Error('the slow case never started');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 300));
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      child = null;
      assert.equal((await env.db('test_case_results').where({ run_id: id, case_id: (await env.db('test_run_cases').where({ run_id: id, name: 'slow' }).first('case_id')).case_id })).length, 0, 'the slow case had no result when its worker died');

      replacement = await startTestRunWorker({ gatewayUrl: stack.gateway.url, taskQueue });
      const done = await waitRun(base(), p.token, id, { timeoutMs: 40_000 });
      assert.equal(done.status, 'passed', JSON.stringify(done, null, 1));
      const results = await env.db('test_case_results').where({ run_id: id }).select('case_id');
      assert.equal(results.length, 3, 'every case reported');
      assert.equal(new Set(results.map((r) => r.case_id)).size, 3, 'each case once');
      const slow = done.cases.find((c: { name: string }) => c.name === 'slow');
      assert.ok(slow.attempts >= 2, `the slow case was retried on the new worker (attempts ${slow.attempts})`);
      assert.equal(done.cases.find((c: { name: string }) => c.name === 'a').attempts, 1, 'a finished case is not executed again');
    } finally {
      child?.kill('SIGKILL');
      await replacement?.stop();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  describe('tokens and browsers', function () {
    let a: TestProject;
    let b: TestProject;
    let bRun: string;
    before(async function () {
      [a, b] = await Promise.all([1, 2].map(() => newProject({ taskQueue: worker.taskQueue, cases: [chatCase('greet', 'hello [sim tokens=2]')] })));
      const r = await call(base(), `/api/projects/${b.id}/runs`, { key: b.token, body: { cases: ['greet'] } });
      bRun = r.json.id;
    });

    it("one project's token cannot read or run another's: 404 exactly like an unknown id", async function () {
      const unknown = await call(base(), `/api/runs/${randomUUID()}`, { key: a.token });
      assert.equal(unknown.status, 404, `an unknown run id is 404: ${unknown.text}`);
      const foreign = await call(base(), `/api/runs/${bRun}`, { key: a.token });
      assert.equal(foreign.status, 404, `another project's run is 404: ${foreign.text}`);
      assert.equal(foreign.json.error.code, unknown.json.error.code, "another project's run looks exactly like an unknown id");
      for (const [method, url, body] of [
        ['POST', `/api/runs/${bRun}/execute`, undefined],
        ['POST', `/api/runs/${bRun}/cancel`, undefined],
        ['GET', `/api/projects/${b.id}`, undefined],
        ['GET', `/api/projects/${b.name}/cases`, undefined],
        ['POST', `/api/projects/${b.id}/runs`, { cases: ['greet'] }],
        ['POST', `/api/projects/${b.id}/cases`, chatCase('intruder', 'x')],
      ] as const) {
        const r = await call(base(), url, { key: a.token, method, body });
        assert.equal(r.status, 404, `${method} ${url}: ${r.text}`);
        assert.equal(r.json.error.code, 'not_found', `${method} ${url}: refused as not found`);
      }
      const still = await call(base(), `/api/runs/${bRun}`, { key: b.token });
      assert.equal(still.status, 200, `the other project still reads its run: ${still.text}`);
      assert.equal(still.json.status, 'created', 'untouched by the other project');
      assert.equal((await env.db('test_cases').where({ project_id: b.id, name: 'intruder' })).length, 0, 'no case was added to the other project');
    });

    it('refuses missing, malformed, foreign and revoked tokens', async function () {
      const none = await call(base(), `/api/runs/${bRun}`);
      assert.equal(none.status, 401, `a request without a token is 401: ${none.text}`);
      assert.equal(none.json.error.code, 'missing_ci_token', 'the refusal says the CI token is missing');
      for (const token of ['nonsense', `trk_${'x'.repeat(43)}`, (await newProject({ taskQueue: worker.taskQueue })).token.replace(/.$/, '_')]) {
        const r = await call(base(), `/api/runs/${bRun}`, { key: token });
        assert.equal(r.status, 401, token);
        assert.equal(r.json.error.code, 'invalid_ci_token', `${token}: refused as an invalid CI token`);
      }
      const t = await createCiToken(env.db, b.id);
      assert.equal((await call(base(), `/api/runs/${bRun}`, { key: t.token })).status, 200, 'a new CI token reads the run');
      await revokeCiToken(env.db, t.id);
      assert.equal((await call(base(), `/api/runs/${bRun}`, { key: t.token })).status, 401, 'revocation takes effect at once');
    });

    it('refuses browser-style requests before authentication and never answers with CORS headers', async function () {
      const browserish: Array<[string, Record<string, string>, string?]> = [
        ['Origin', { origin: 'https://evil.example' }],
        ['Origin null', { origin: 'null' }],
        ['Sec-Fetch-Site', { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }],
        ['navigation', { 'sec-fetch-mode': 'navigate' }],
        ['preflight', { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' }, 'OPTIONS'],
      ];
      for (const [what, headers, method] of browserish) {
        // undici.request sends exactly these headers (fetch would replace Sec-Fetch-Mode with its own).
        const r = await request(`${base()}/api/runs/${bRun}`, { method: (method ?? 'GET') as 'GET', headers: { authorization: `Bearer ${b.token}`, ...headers } });
        const json = (await r.body.json()) as { error: { code: string } };
        assert.equal(r.statusCode, 403, `${what}: ${JSON.stringify(json)}`);
        assert.equal(json.error.code, 'browser_request_refused', `${what}: refused as a browser request`);
        for (const h of Object.keys(r.headers)) assert.ok(!h.startsWith('access-control-'), `${what}: no CORS header (${h})`);
      }
      // Node's fetch sends Sec-Fetch-Mode: cors by itself; a CI script using it is served.
      const node = await fetch(`${base()}/api/runs/${bRun}`, { headers: { authorization: `Bearer ${b.token}` } });
      assert.equal(node.status, 200, "Node's fetch from a CI script is served");
      assert.equal(node.headers.get('access-control-allow-origin'), null, 'no CORS header on the answer');
    });
  });

  it('operator commands: project create, ci-token create, case add, config set (real process)', async function () {
    const account = await newAccount();
    const cliEnv = { ...process.env, DATABASE_URL: env.databaseUrl, TESTRUN_SECRET: SEALING_SECRET };
    const cli = (...args: string[]) =>
      new Promise<{ code: number; json: any }>((resolve, reject) => // eslint-disable-line @typescript-eslint/no-explicit-any
        execFile(TSX, ['admin/cli.ts', ...args], { cwd: ROOT, env: cliEnv, timeout: 30_000 }, (err, stdout) => {
          if (err && typeof err.code !== 'number') return reject(err);
          resolve({ code: err ? (err.code as number) : 0, json: JSON.parse(stdout.trim().split('\n').pop()!) });
        }),
      );
    const name = `cli-${randomUUID()}`;
    const project = await cli('project', 'create', '--name', name, '--account', account.accountId, '--max-concurrency', '2', '--task-queue', worker.taskQueue);
    assert.equal(project.code, 0, JSON.stringify(project.json));
    assert.equal(project.json.max_concurrency, 2, 'the project keeps its max concurrency');
    assert.equal(project.json.gateway_key_prefix.length, 12, 'the project answer shows the 12-character gateway key prefix');
    assert.doesNotMatch(JSON.stringify(project.json), /gw_ai_[A-Za-z0-9_-]{13,}/, 'the gateway key itself is never shown');
    assert.ok(!('gateway_key_sealed' in project.json), 'the sealed gateway key is not in the project answer');
    const token = await cli('ci-token', 'create', '--project', name, '--label', 'ci');
    assert.equal(token.code, 0, JSON.stringify(token.json));
    assert.match(token.json.token, /^trk_[A-Za-z0-9_-]{43}$/, `the CI token has the trk_ form: ${token.json.token}`);
    const added = await cli('case', 'add', '--project', name, '--name', 'hello', '--dialect', 'chat', '--body', '{"model":"sim-gpt","messages":[{"role":"user","content":"hi there [sim tokens=2]"}]}', '--assertions', '{"contains":"hi"}', '--tags', 'smoke');
    assert.equal(added.code, 0, JSON.stringify(added.json));
    const cfg = await cli('config', 'set', '--project', name, '--name', 'quick', '--json', '{"case_timeout_seconds":5}');
    assert.equal(cfg.code, 0, JSON.stringify(cfg.json));
    const badCase = await cli('case', 'add', '--project', name, '--name', 'bad', '--dialect', 'nope', '--body', '{}');
    assert.notEqual(badCase.code, 0, 'a case with an unknown dialect exits non-zero');
    assert.ok(badCase.json.error, `a case with an unknown dialect is refused with an error: ${JSON.stringify(badCase.json)}`);

    // The key the command created works through the whole path.
    const p = { id: project.json.id, name, token: token.json.token, accountId: account.accountId };
    const id = await startRun(base(), p, { tags: ['smoke'], configuration_id: 'quick' });
    const done = await waitRun(base(), p.token, id);
    assert.equal(done.status, 'passed', JSON.stringify(done, null, 1));
    const revoked = await cli('ci-token', 'revoke', '--id', token.json.id);
    assert.equal(revoked.code, 0, 'revoking the CI token succeeds');
    assert.equal((await call(base(), `/api/runs/${id}`, { key: p.token })).status, 401, 'the revoked CI token is refused');
  });
});
