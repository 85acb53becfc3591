import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createKey } from '../../services/keys/keys';
import { Worker } from '@temporalio/worker';
import { SA } from '../../domain/shared/search-attributes';
import { videoWorkflowId } from '../../domain/media/video';
import { call, checkInvariants, newAccount, settled, type TestAccount } from '../helpers/stack';
import { jobReaches, spawnMediaWorker, startVideoStack, type VideoStack } from '../helpers/video-stack';
import { env } from '../setup/env';

// Video jobs (spec 1 sections 2.7, 3.1, 4.3, 4.9) over real HTTP, a real Temporal and PostgreSQL,
// against the simulator. Polling intervals are shortened through the workflow input.

const MODEL = 'sim-video-1';
const NO_AUDIO_MODEL = 'sim-video-noaudio-test';
/** offers 1080p but has no 1080p price yet */
const UNPRICED_MODEL = 'sim-video-unpriced-test';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A create body whose prompt carries simulator controls. */
const job = (controls: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, prompt: `a red fox in snow [sim ${controls}]`, ...extra });

async function simJob(jobId: string) {
  const row = await env.db('video_jobs').where({ id: jobId }).first();
  const res = await fetch(`${env.simulator.url}/_sim/videos/${row.upstream_id}`);
  return (await res.json()) as Record<string, unknown>;
}

async function events(jobId: string): Promise<string[]> {
  return (await env.db('video_job_events').where({ job_id: jobId }).orderBy('id')).map((e: { status: string }) => e.status);
}

async function ledgerOf(reservationId: string) {
  return env.db('ledger').where({ reservation_id: reservationId }).orderBy('id').select('kind', 'amount');
}

async function expectBalanced(accountId: string) {
  const inv = await checkInvariants(accountId);
  assert.equal(Number(inv.account.reserved_credits), Number(inv.reservations.reserved), "the account's reserved credits equal its open reservations");
  assert.equal(inv.account.pending_requests, inv.reservations.pending, "the account's pending requests equal its pending reservations");
  assert.equal(Number(inv.account.total_usage), Number(inv.ledger.usage), "the account's total usage equals its ledger charges");
  return inv;
}

describe('video jobs', function () {
  this.timeout(60_000);
  let stack: VideoStack;
  let acct: TestAccount;

  before(async () => {
    const base = await env.db('models').where({ id: MODEL }).first();
    await env.db('models')
      .insert([
        { ...base, id: NO_AUDIO_MODEL, details: { ...base.details, generate_audio: false } },
        { ...base, id: UNPRICED_MODEL, details: { ...base.details, pricing_skus: { '480p': '0.05', '720p': '0.1' } } },
      ])
      .onConflict('id')
      .merge();
    stack = await startVideoStack({
      polling: { initialMs: 50, factor: 1.5, maxMs: 200, createWaitMs: 5_000, lateCostWaitMs: 2_500, unbilledCostWaitMs: 300, pollsPerRun: 3 },
    });
  });
  after(async () => {
    await stack?.close();
    await env.db('models').whereIn('id', [NO_AUDIO_MODEL, UNPRICED_MODEL]).delete();
  });
  beforeEach(async () => {
    acct = await newAccount({ credits: '10' });
  });

  const create = (body: unknown, a: TestAccount = acct, headers: Record<string, string> = {}) => call(stack.url, '/v1/videos', { key: a.key, body, headers });
  const poll = (id: string, a: TestAccount = acct) => call(stack.url, `/v1/videos/${id}`, { key: a.key });

  /** GET after the job's reservation is resolved: the final object with usage. */
  async function finalObject(id: string, a: TestAccount = acct) {
    const row = await env.db('video_jobs').where({ id }).first();
    await settled(row.reservation_id);
    await sleep(1_050); // the per-job poll limit of the earlier GET
    const res = await poll(id, a);
    assert.equal(res.status, 200, `the final object is readable: ${res.text}`);
    return res.json;
  }

  describe('POST /v1/videos', () => {
    it('answers 202 pending after holding duration × resolution price, and starts video-<id> with its search attributes', async () => {
      const res = await create(job('render_ms=2000', { duration: 8, resolution: '1080p' }));
      assert.equal(res.status, 202, res.text);
      assert.match(res.json.id, /^gen-vid-\d+-[A-Za-z0-9]+$/, 'the job id has the gen-vid form');
      assert.equal(res.json.status, 'pending', 'a new job is pending');
      assert.equal(res.json.polling_url, `${stack.url}/v1/videos/${res.json.id}`, "the polling URL is the job's GET URL");
      const requestId = res.headers.get('x-gateway-request-id')!;
      const hold = await env.db('reservations').where({ id: requestId }).first();
      assert.equal(hold.status, 'held', 'the hold is held');
      assert.equal(Number(hold.held_credits), 1.6, '8 s at 0.2 credits per second for 1080p holds 1.6'); // 8 s × 0.2 credits per second at 1080p
      assert.equal(hold.modality, 'video', 'the hold is for video');
      assert.equal(hold.owner_workflow_id, videoWorkflowId(res.json.id), "the job's workflow owns the hold");
      const jobRow = await env.db('video_jobs').where({ id: res.json.id }).first();
      assert.equal(jobRow.status, 'pending', 'the job row is pending');
      assert.equal(jobRow.reservation_id, requestId, 'the job row points at its hold');
      // No reservation workflow: the job's own workflow owns the hold.
      const d = await stack.temporal.workflow.getHandle(videoWorkflowId(res.json.id)).describe();
      assert.equal(d.taskQueue, stack.taskQueue, 'the workflow runs on the media task queue');
      assert.equal(d.typedSearchAttributes.get(SA.Kind), 'video', 'the Kind search attribute is video');
      assert.equal(d.typedSearchAttributes.get(SA.AccountId), acct.accountId, 'the AccountId search attribute is the account');
      assert.equal(d.typedSearchAttributes.get(SA.Model), MODEL, 'the Model search attribute is the model');
      assert.deepEqual(await d.memo, { job_id: res.json.id, model: MODEL, duration: 8, resolution: '1080p', held: '1.6' }, 'the memo carries the job id, model, duration, resolution and held amount');
      await assert.rejects(stack.temporal.workflow.getHandle(`reservation-${requestId}`).describe());
      const first = await poll(res.json.id);
      assert.equal(first.json.status, 'pending', 'the first poll is pending');
      assert.equal(first.json.usage, undefined, 'no usage while pending');
      assert.equal((await simJob(res.json.id)).seconds, 8, 'the simulator renders the 8 s asked for');
      await jobReaches(res.json.id, ['completed']);
      // The job row is written by an activity; the workflow upserts Status right after it.
      const handle = stack.temporal.workflow.getHandle(videoWorkflowId(res.json.id));
      let status: unknown;
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
        status = (await handle.describe()).typedSearchAttributes.get(SA.Status);
        if (status === 'completed') break;
      }
      assert.equal(status, 'completed', 'the Status search attribute reaches completed');
    });

    it('refuses invalid requests with a 400 naming the parameter, holding nothing', async () => {
      const cases: Array<[Record<string, unknown>, number, string, string | null]> = [
        [{ model: MODEL }, 400, 'missing_required_parameter', 'prompt'],
        [{ prompt: 'x' }, 400, 'missing_required_parameter', 'model'],
        [job('', { duration: 5 }), 400, 'invalid_parameter', 'duration'],
        [job('', { resolution: '4K' }), 400, 'invalid_parameter', 'resolution'],
        [job('', { aspect_ratio: '4:3' }), 400, 'invalid_parameter', 'aspect_ratio'],
        [job('', { size: '7680x4320' }), 400, 'invalid_parameter', 'size'],
        [job('', { seconds: 4 }), 400, 'unsupported_parameter', 'seconds'],
        [
          {
            model: MODEL,
            frame_images: [
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' }, frame_type: 'first_frame' },
              { type: 'image_url', image_url: { url: 'https://example.com/b.png' }, frame_type: 'first_frame' },
            ],
          },
          400,
          'invalid_parameter',
          'frame_images',
        ],
        [{ ...job(''), model: NO_AUDIO_MODEL, generate_audio: true }, 400, 'unsupported_parameter', 'generate_audio'],
        [job('', { previous_job_id: 'gen-vid-1-nope' }), 400, 'invalid_parameter', 'previous_job_id'],
        [{ model: 'sim-gpt', prompt: 'x' }, 400, 'unsupported_capability', 'model'],
        [{ ...job(''), model: UNPRICED_MODEL, resolution: '1080p' }, 503, 'model_pricing_unavailable', null],
      ];
      for (const [body, status, code, param] of cases) {
        const res = await create(body);
        assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
        assert.equal(res.json.error.code, code, JSON.stringify(body));
        assert.equal(res.json.error.param, param, JSON.stringify(body));
      }
      assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 0, 'no invalid request held anything');
      assert.equal((await env.db('video_jobs').where({ account_id: acct.accountId })).length, 0, 'no invalid request created a job');
      // Without a prompt, frame images or references suffice; generate_audio where the model can.
      const frames = await create({ model: MODEL, frame_images: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' }, frame_type: 'last_frame' }], generate_audio: true });
      assert.equal(frames.status, 202, frames.text);
      const refs = await create({ model: MODEL, input_references: [{ type: 'video_url', video_url: { url: 'https://example.com/a.mp4' } }] });
      assert.equal(refs.status, 202, refs.text);
    });

    it('402 when the balance cannot cover the hold', async () => {
      const poor = await newAccount({ credits: '0.3' });
      const res = await create(job(''), poor); // 4 s × 0.1 = 0.4
      assert.equal(res.status, 402, `a hold the balance cannot cover is refused with 402: ${res.text}`);
      assert.equal(res.json.error.code, 'insufficient_quota', 'the refusal is insufficient_quota');
    });

    it('previous_job_id continues a completed job of the same account and model only', async () => {
      const first = await create(job('render_ms=100'));
      const running = await create(job('render_ms=5000'));
      await jobReaches(first.json.id, ['completed']);
      const ok = await create(job('render_ms=100', { previous_job_id: first.json.id }));
      assert.equal(ok.status, 202, ok.text);
      const notDone = await create(job('', { previous_job_id: running.json.id }));
      assert.equal(notDone.json.error.param, 'previous_job_id', 'a job not completed cannot be continued');
      const other = await newAccount();
      const foreign = await create(job('', { previous_job_id: first.json.id }), other);
      assert.equal(foreign.status, 400, `another account's job cannot be continued: ${foreign.text}`);
      assert.equal(foreign.json.error.param, 'previous_job_id', 'the refusal names previous_job_id');
    });
  });

  describe('transitions of spec 3.1 and the final charge', () => {
    it('pending → in_progress → completed: download URLs, provider cost charged once, unused hold returned', async () => {
      const res = await create(job('render_ms=1500'));
      const id = res.json.id;
      await jobReaches(id, ['in_progress']);
      await jobReaches(id, ['completed']);
      assert.deepEqual(await events(id), ['pending', 'in_progress', 'completed'], 'the job passed through pending, in_progress and completed');
      const body = await finalObject(id);
      assert.equal(body.status, 'completed', 'the final object is completed');
      assert.deepEqual(body.unsigned_urls, [`${stack.url}/v1/videos/${id}/content?index=0`], 'one download URL for the completed job');
      assert.equal(body.usage.cost, 0.2, 'the charge is the provider cost: 0.05 per second × 4 s'); // the simulator's 0.05 USD per second × 4 s, 1 credit per USD
      assert.deepEqual(body.usage.cost_details, { billing_source: 'provider_cost', is_estimate: false, reserved_credits: 0.4 }, 'billed by provider cost, not an estimate, 0.4 was held');
      assert.equal(body.usage.balance.before, 10, 'the balance before is 10');
      assert.equal(body.usage.balance.after, 9.8, 'the balance after is 9.8');
      assert.equal(body.error, undefined, 'no error on a completed job');
      const r = res.headers.get('x-gateway-request-id')!;
      assert.deepEqual((await ledgerOf(r)).map((l) => [l.kind, Number(l.amount)]), [['hold', 0.4], ['release', 0.4], ['charge', 0.2]], 'held 0.4, released 0.4, charged 0.2');
      const inv = await expectBalanced(acct.accountId);
      assert.equal(Number(inv.account.total_usage), 0.2, "the account's usage is the 0.2 charged");
      const gen = await call(stack.url, `/v1/generation?id=${r}`, { key: acct.key });
      assert.equal(gen.status, 200, gen.text);
    });

    it('failed: error set, not billed, hold returned', async () => {
      const { json } = await create(job('render_ms=200 outcome=failed'));
      await jobReaches(json.id, ['failed']);
      const body = await finalObject(json.id);
      assert.equal(body.status, 'failed', 'the final object is failed');
      assert.match(body.error, /Simulated render failure/, "the error is the provider's render failure");
      assert.equal(body.unsigned_urls, undefined, 'a failed job has no download URLs');
      assert.equal(body.usage.cost, 0, 'a failed job costs nothing');
      assert.equal(body.usage.cost_details.billing_source, 'not_billed', 'a failed job is not billed');
      const inv = await expectBalanced(acct.accountId);
      assert.equal(Number(inv.account.total_usage), 0, 'the account is charged nothing');
    });

    for (const outcome of ['cancelled', 'expired'] as const) {
      it(`${outcome}: not billed, hold returned`, async () => {
        const { json } = await create(job(`render_ms=200 outcome=${outcome}`));
        await jobReaches(json.id, [outcome]);
        const body = await finalObject(json.id);
        assert.equal(body.status, outcome, `the final object is ${outcome}`);
        assert.equal(body.usage.cost, 0, `a ${outcome} job costs nothing`);
        assert.equal(body.usage.cost_details.billing_source, 'not_billed', `a ${outcome} job is not billed`);
        assert.equal(Number((await expectBalanced(acct.accountId)).account.total_usage), 0, 'the account is charged nothing');
      });
    }

    it('a failed job the provider charged for is billed the provider cost', async () => {
      const { json } = await create(job('render_ms=200 outcome=failed cost=0.15'));
      const body = await finalObject(json.id);
      assert.equal(body.status, 'failed', 'the final object is failed');
      assert.equal(body.usage.cost, 0.15, "the provider's 0.15 for the failed job is charged");
      assert.equal(body.usage.cost_details.billing_source, 'provider_cost', 'billed by provider cost');
    });

    it('a late provider cost: completed first, usage only once the cost appears', async () => {
      const { json } = await create(job('render_ms=200 cost_delay=1500 cost=0.33'));
      await jobReaches(json.id, ['completed']);
      const early = await poll(json.id);
      assert.equal(early.json.status, 'completed', 'the job shows completed before its cost is known');
      assert.equal(early.json.usage, undefined, 'no usage before the final charge');
      const body = await finalObject(json.id);
      assert.equal(body.usage.cost, 0.33, 'the late provider cost 0.33 is charged');
      assert.equal(body.usage.cost_details.billing_source, 'provider_cost', 'billed by the late provider cost');
    });

    it('completed without any provider cost: the estimate of 2.1 after the wait', async () => {
      const { json } = await create(job('render_ms=100 cost=none'));
      const body = await finalObject(json.id);
      assert.equal(body.status, 'completed', 'the final object is completed');
      assert.equal(body.usage.cost, 0.4, 'without a provider cost the estimate 0.4 is charged');
      assert.deepEqual(body.usage.cost_details, { billing_source: 'estimate', is_estimate: true, reserved_credits: 0.4 }, 'billed by estimate, marked as one');
      // pollsPerRun is 3 here: waiting that long for a cost continued as new, and still charged once.
      const history = await stack.temporal.workflow.getHandle(videoWorkflowId(json.id)).fetchHistory();
      assert.ok(history.events?.[0].workflowExecutionStartedEventAttributes?.continuedExecutionRunId, 'the last run continued an earlier one');
      const row = await env.db('video_jobs').where({ id: json.id }).first();
      assert.deepEqual((await ledgerOf(row.reservation_id)).map((l) => l.kind), ['hold', 'release', 'charge'], 'charged once across the continued runs');
    });

    it('a provider refusing the create: error to the client, job failed, hold returned', async () => {
      const res = await create(job('status=500'));
      assert.equal(res.status, 502, res.text);
      assert.equal(res.json.error.code, 'provider_error', 'the provider refusal is a provider_error');
      const row = await env.db('video_jobs').where({ account_id: acct.accountId }).first();
      await jobReaches(row.id, ['failed']);
      const r = await settled(row.reservation_id);
      assert.equal(r.billing_source, 'not_billed', 'the failed create is not billed');
      assert.equal(Number((await expectBalanced(acct.accountId)).account.total_usage), 0, 'the account is charged nothing');
    });
  });

  describe('exactly-once final charge', () => {
    it('under repeated polling: too-fast polls get 429 with retry-after, polls never call the provider or charge', async () => {
      const { json } = await create(job('render_ms=1200'));
      let ok = 0;
      let limited = 0;
      const until = Date.now() + 2_500;
      while (Date.now() < until) {
        const res = await poll(json.id);
        if (res.status === 200) ok++;
        else {
          assert.equal(res.status, 429, `a poll that is not 200 is rate limited: ${res.text}`);
          assert.equal(res.json.error.code, 'rate_limit_exceeded', 'the too-fast poll is rate_limit_exceeded');
          assert.ok(Number(res.headers.get('retry-after')) >= 1, `a 429 carries retry-after: ${res.headers.get('retry-after')}`);
          limited++;
        }
        await sleep(20);
      }
      assert.ok(ok >= 2 && limited > 10, `ok ${ok}, limited ${limited}`);
      const body = await finalObject(json.id);
      const simPolls = (await simJob(json.id)).polls;
      for (let i = 0; i < 3; i++) {
        await sleep(1_020);
        assert.deepEqual((await poll(json.id)).json, body, `poll ${i + 1} after the final object answers the same object`);
      }
      assert.equal((await simJob(json.id)).polls, simPolls, 'client polls never reach the provider');
      const row = await env.db('video_jobs').where({ id: json.id }).first();
      const charges = (await ledgerOf(row.reservation_id)).filter((l) => l.kind === 'charge');
      assert.equal(charges.length, 1, 'charged exactly once under repeated polling');
      await expectBalanced(acct.accountId);
    });

    it('under a worker killed (SIGKILL) mid-job', async () => {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'video-kill-'));
      const bundlePath = path.join(tmp, 'workflows.js');
      fs.writeFileSync(bundlePath, env.bundles.media.code);
      await stack.stopWorker();
      const child = await spawnMediaWorker({ databaseUrl: env.databaseUrl, temporalAddress: env.temporalAddress, taskQueue: stack.taskQueue, bundlePath, stickyTimeout: '1s' });
      try {
        const { json } = await create(job('render_ms=2500 cost=0.25'));
        await jobReaches(json.id, ['in_progress']);
        await child.kill('SIGKILL');
        await sleep(3_000); // the render finishes while no worker runs
        assert.equal((await env.db('video_jobs').where({ id: json.id }).first()).status, 'in_progress', 'the job is still in progress while no worker runs');
        await stack.startWorker();
        const body = await finalObject(json.id);
        assert.equal(body.status, 'completed', 'the job completes after the worker is back');
        assert.equal(body.usage.cost, 0.25, 'the provider cost 0.25 is charged');
        const row = await env.db('video_jobs').where({ id: json.id }).first();
        assert.deepEqual((await ledgerOf(row.reservation_id)).map((l) => l.kind), ['hold', 'release', 'charge'], 'one hold, one release, one charge after the kill');
        assert.deepEqual(await events(json.id), ['pending', 'in_progress', 'completed'], 'the job passed through pending, in_progress and completed once each');
        const result = await stack.temporal.workflow.getHandle(videoWorkflowId(json.id)).result();
        assert.equal(result.settlement.billingSource, 'provider_cost', 'the workflow settled with the provider cost');
        assert.equal(result.settlement.applied, true, 'the settlement was applied');
        await expectBalanced(acct.accountId);
      } finally {
        await child.kill('SIGKILL');
        if (!stack.worker) await stack.startWorker();
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    });
  });

  describe('workflow determinism', () => {
    it('a recorded video workflow history replays without non-determinism', async () => {
      const { json } = await create(job('render_ms=800 cost_delay=300'));
      const handle = stack.temporal.workflow.getHandle(videoWorkflowId(json.id));
      await handle.result();
      await Worker.runReplayHistory({ workflowBundle: env.bundles.media }, await handle.fetchHistory(), videoWorkflowId(json.id));
    });
  });

  describe('GET /v1/videos/{id}', () => {
    it('a job of another account answers 404 like an unknown id', async () => {
      const { json } = await create(job('render_ms=100'));
      const other = await newAccount();
      const foreign = await poll(json.id, other);
      const unknown = await poll('gen-vid-123-doesnotexist', other);
      const garbage = await poll('not-a-job-id', other);
      for (const r of [foreign, unknown, garbage]) {
        assert.equal(r.status, 404, `a job of another account or an unknown id answers 404: ${r.text}`);
        assert.equal(r.json.error.code, 'not_found', 'the refusal is not_found');
      }
      const content = await call(stack.url, `/v1/videos/${json.id}/content?index=0`, { key: other.key });
      assert.equal(content.status, 404, `another account cannot download the job's content: ${content.text}`);
    });
  });

  describe('GET /v1/videos/{id}/content', () => {
    it('409 before completion, bytes with Range after, the same key required, 410 once the provider dropped it', async () => {
      const { json } = await create(job('render_ms=600 content_bytes=4096 content_ttl_ms=2500'));
      const early = await call(stack.url, `/v1/videos/${json.id}/content?index=0`, { key: acct.key });
      assert.equal(early.status, 409, `content before completion answers 409: ${early.text}`);
      assert.equal(early.json.error.code, 'generation_not_ready', 'the refusal is generation_not_ready');
      await jobReaches(json.id, ['completed']);
      const url = `${stack.url}/v1/videos/${json.id}/content?index=0`;
      const whole = await fetch(url, { headers: { authorization: `Bearer ${acct.key}` } });
      assert.equal(whole.status, 200, 'the whole content is served after completion');
      assert.equal(whole.headers.get('content-type'), 'video/mp4', 'the content is an mp4');
      assert.equal(whole.headers.get('accept-ranges'), 'bytes', 'the content accepts byte ranges');
      const all = Buffer.from(await whole.arrayBuffer());
      assert.equal(all.length, 4096, 'the whole 4096 bytes are served');
      assert.equal(all.subarray(4, 8).toString('latin1'), 'ftyp', 'the bytes are an mp4 (ftyp box)');
      const part = await fetch(url, { headers: { authorization: `Bearer ${acct.key}`, range: 'bytes=100-199' } });
      assert.equal(part.status, 206, 'a byte range answers 206');
      assert.equal(part.headers.get('content-range'), 'bytes 100-199/4096', 'the content-range names bytes 100-199 of 4096');
      assert.deepEqual(Buffer.from(await part.arrayBuffer()), all.subarray(100, 200), 'the range is those bytes of the whole');
      const tail = await fetch(url, { headers: { authorization: `Bearer ${acct.key}`, range: 'bytes=-10' } });
      assert.equal(tail.status, 206, 'a suffix range answers 206');
      assert.deepEqual(Buffer.from(await tail.arrayBuffer()), all.subarray(4086), 'the suffix range is the last 10 bytes');
      const bad = await call(stack.url, `/v1/videos/${json.id}/content?index=0`, { key: acct.key, headers: { range: 'bytes=5000-' } });
      assert.equal(bad.status, 416, `a range past the end answers 416: ${bad.text}`);
      assert.equal(bad.headers.get('content-range'), 'bytes */4096', 'the 416 content-range gives the length');
      const index = await call(stack.url, `/v1/videos/${json.id}/content?index=1`, { key: acct.key });
      assert.equal(index.status, 400, `an index past the videos answers 400: ${index.text}`);
      assert.equal(index.json.error.param, 'index', 'the refusal names the index parameter');
      // Another key of the same account may poll the job, but not download it.
      const second = await createKey(env.db, { accountId: acct.accountId, label: 'second' });
      assert.equal((await call(stack.url, `/v1/videos/${json.id}`, { key: second.key })).status, 200, 'another key of the account may poll the job');
      assert.equal((await call(stack.url, `/v1/videos/${json.id}/content?index=0`, { key: second.key })).status, 404, 'another key of the account may not download it');
      await sleep(2_600);
      const gone = await call(stack.url, `/v1/videos/${json.id}/content?index=0`, { key: acct.key });
      assert.equal(gone.status, 410, `content the provider dropped answers 410: ${gone.text}`);
      assert.equal(gone.json.error.code, 'content_expired', 'the refusal is content_expired');
    });
  });

  describe('Idempotency-Key', () => {
    it('same key and content: the same job, one render, one hold', async () => {
      const headers = { 'idempotency-key': `k-${Date.now()}` };
      const a = await create(job('render_ms=300'), acct, headers);
      const b = await create(job('render_ms=300'), acct, headers);
      assert.equal(a.status, 202, `the first create is accepted: ${a.text}`);
      assert.equal(b.status, 202, `the repeated create is accepted: ${b.text}`);
      assert.equal(b.json.id, a.json.id, 'the repeated create answers the same job');
      assert.equal(b.headers.get('x-gateway-request-id'), a.headers.get('x-gateway-request-id'), 'the repeated create answers the same request id');
      await finalObject(a.json.id);
      const c = await create(job('render_ms=300'), acct, headers);
      assert.equal(c.json.id, a.json.id, 'the key still answers the same job once it completed');
      assert.equal((await env.db('video_jobs').where({ account_id: acct.accountId })).length, 1, 'one job for the repeated key');
      assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 1, 'one hold for the repeated key');
      assert.equal(Number((await expectBalanced(acct.accountId)).account.total_usage), 0.2, 'the one job is charged once');
    });

    it('while the first is still being created: 409 idempotent_request_in_progress with retry-after', async () => {
      const headers = { 'idempotency-key': `slow-${Date.now()}` };
      const first = create(job('render_ms=200 latency=1200'), acct, headers);
      await sleep(300);
      const second = await create(job('render_ms=200 latency=1200'), acct, headers);
      assert.equal(second.status, 409, `a second create while the first is still creating answers 409: ${second.text}`);
      assert.equal(second.json.error.code, 'idempotent_request_in_progress', 'the refusal is idempotent_request_in_progress');
      assert.ok(Number(second.headers.get('retry-after')) >= 1, `a 409 in progress carries retry-after: ${second.headers.get('retry-after')}`);
      const done = await first;
      assert.equal(done.status, 202, `the first create is accepted: ${done.text}`);
      assert.equal((await env.db('video_jobs').where({ account_id: acct.accountId })).length, 1, 'one job for the two creates');
    });

    it('a claim left without a job by a process that died is taken over once it is stale', async () => {
      const key = `orphan-${Date.now()}`;
      const claim = { account_id: acct.accountId, scope: 'video', key, body_hash: 'from-a-dead-process' };
      // Fresh, it still stands: this other content is refused as a reused key.
      await env.db('idempotency_keys').insert(claim);
      const waiting = await create(job('render_ms=100'), acct, { 'idempotency-key': key });
      assert.equal(waiting.status, 409, `a fresh claim refuses other content: ${waiting.text}`);
      assert.equal(waiting.json.error.code, 'idempotency_key_reused', 'the refusal is idempotency_key_reused');
      // Older than the provider timeout plus slack: the next request creates the job.
      await env.db('idempotency_keys').where({ account_id: acct.accountId, key }).update({ created_at: env.db.raw("now() - interval '1 hour'") });
      const taken = await create(job('render_ms=100'), acct, { 'idempotency-key': key });
      assert.equal(taken.status, 202, JSON.stringify(taken.json));
      const row = await env.db('idempotency_keys').where({ account_id: acct.accountId, key }).first();
      assert.equal(row.result_id, taken.json.id, 'the stale claim now records the new job');
      const again = await create(job('render_ms=100'), acct, { 'idempotency-key': key });
      assert.equal(again.json.id, taken.json.id, 'the key now answers the taken-over job');
      await finalObject(taken.json.id);
    });

    it('same key, different content: 409 idempotency_key_reused, nothing held', async () => {
      const headers = { 'idempotency-key': `reuse-${Date.now()}` };
      assert.equal((await create(job('render_ms=100'), acct, headers)).status, 202, 'the first create is accepted');
      const other = await create(job('render_ms=100', { duration: 8 }), acct, headers);
      assert.equal(other.status, 409, `the same key with other content answers 409: ${other.text}`);
      assert.equal(other.json.error.code, 'idempotency_key_reused', 'the refusal is idempotency_key_reused');
      assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 1, 'nothing was held for the refused create');
    });
  });

  describe('GET /v1/videos/models', () => {
    it('lists the video models with the fields of spec 2.8', async () => {
      const res = await call(stack.url, '/v1/videos/models', { key: acct.key });
      assert.equal(res.status, 200, `the video models are listed: ${res.text.slice(0, 300)}`);
      const m = res.json.data.find((x: { id: string }) => x.id === MODEL);
      assert.deepEqual(m, {
        id: MODEL,
        object: 'model',
        owned_by: 'simulator',
        capabilities: ['video_generation'],
        supported_durations: [4, 8, 12],
        default_duration: 4,
        supported_resolutions: ['480p', '720p', '1080p'],
        supported_aspect_ratios: ['16:9', '9:16', '1:1'],
        generate_audio: true,
        pricing_skus: { '480p': 0.05, '720p': 0.1, '1080p': 0.2 },
      }, 'the model entry has the fields of spec 2.8');
      assert.ok(res.json.data.every((x: { capabilities: string[] }) => x.capabilities.includes('video_generation')), `every listed model generates video: ${JSON.stringify(res.json.data.map((x: { id: string }) => x.id))}`);
    });
  });
});
