import assert from 'node:assert/strict';
import type { WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { SettlementActivities } from '../../activities/credits/settlement';
import type { VideoActivities } from '../../activities/media/video';
import type { RequestReport, SettlementResult } from '../../domain/credits/reservation';
import { DEFAULT_VIDEO_POLLING, videoCreatedSignal, videoWorkflowId, type ProviderVideo, type VideoJobInput, type VideoStatus } from '../../domain/media/video';
import { createDomainWorker } from '../../workers/base';
import type { videoWorkflow } from '../../workflows/media/video';
import { createTimeSkippingEnv, startedTimers, withinRealTime } from '../helpers/time-skipping';
import { env } from '../setup/env';

// The video job workflow with its PRODUCTION polling (minutes-long waits) on the time-skipping
// test server, with mocked activities: the timers are skipped, never shortened through the input.
// Delays are read from the workflow history (TimerStarted), times from the test server's clock.

const UPSTREAM = 'vid-upstream-1';
const ESTIMATE = '2.5';
const MINUTE = 60_000;
/** the waits of DEFAULT_VIDEO_POLLING: 2 s × 1.5 per poll, capped at 15 s */
const GROWING = [2_000, 3_000, 4_500, 6_750, 10_125, 15_000, 15_000, 15_000];

const pending: ProviderVideo = { status: 'pending', error: null, cost: null };
const working: ProviderVideo = { status: 'in_progress', error: null, cost: null };
const completed = (cost: string | null): ProviderVideo => ({ status: 'completed', error: null, cost });

interface Settled {
  reservationId: string;
  report: RequestReport;
  atMs: number;
}

/** A provider answering by poll number and by the test server's time, and what the workflow did. */
class FakeJob {
  readonly polls: number[] = [];
  readonly statuses: [VideoStatus, string | null][] = [];
  readonly settled: Settled[] = [];

  constructor(
    private readonly testEnv: TestWorkflowEnvironment,
    private readonly answer: (poll: number, atMs: number) => ProviderVideo,
  ) {}

  readonly activities: VideoActivities & Pick<SettlementActivities, 'settleReservation'> = {
    pollVideo: async (providerId: string, upstreamId: string): Promise<ProviderVideo> => {
      assert.equal(providerId, 'simulator', 'the job is polled on the provider it was created on');
      assert.equal(upstreamId, UPSTREAM, 'the job is polled by the upstream id the create reported');
      const at = await this.testEnv.currentTimeMs();
      this.polls.push(at);
      return this.answer(this.polls.length, at);
    },
    recordVideoStatus: async (_jobId: string, status: VideoStatus, error: string | null): Promise<boolean> => {
      this.statuses.push([status, error]);
      return true;
    },
    settleReservation: async (reservationId: string, report: RequestReport): Promise<SettlementResult> => {
      this.settled.push({ reservationId, report, atMs: await this.testEnv.currentTimeMs() });
      const billed = report.billable;
      return {
        reservationId,
        status: billed ? 'settled' : 'released',
        billingSource: billed ? report.media!.billingSource : 'not_billed',
        charge: billed ? report.media!.amount : '0',
        applied: true,
      };
    },
  };

  get only(): Settled {
    assert.equal(this.settled.length, 1, 'settled exactly once');
    return this.settled[0];
  }
}

/** The durations of the timers each run started, first run first (follows continue-as-new). */
async function timersByRun(handle: WorkflowHandleWithFirstExecutionRunId<typeof videoWorkflow>, testEnv: TestWorkflowEnvironment): Promise<number[][]> {
  const runs: number[][] = [];
  let runId: string | undefined = handle.firstExecutionRunId;
  while (runId) {
    const run: WorkflowHandle = testEnv.client.workflow.getHandle(handle.workflowId, runId);
    runs.push(await startedTimers(run));
    const { events } = await run.fetchHistory();
    const continued = events?.find((e) => e.workflowExecutionContinuedAsNewEventAttributes)?.workflowExecutionContinuedAsNewEventAttributes;
    runId = continued?.newExecutionRunId ?? undefined;
  }
  return runs;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('video job workflow on production polling (time skipping, mocked activities)', function () {
  this.timeout(30_000);
  let testEnv: TestWorkflowEnvironment;
  let n = 0;

  before(async function () {
    // GROWING and the minute counts below are those of the production defaults.
    assert.deepEqual(DEFAULT_VIDEO_POLLING, { initialMs: 2_000, factor: 1.5, maxMs: 15_000, createWaitMs: 3 * MINUTE, lateCostWaitMs: 10 * MINUTE, unbilledCostWaitMs: MINUTE, pollsPerRun: 200 }, 'the production polling defaults that GROWING and the minute counts assume');
    testEnv = await createTimeSkippingEnv();
  });

  after(async function () {
    await testEnv?.teardown();
  });

  /** Starts a job on its own task queue, reports the create (unless `created: false`), runs a worker until it ends. */
  async function runJob(job: FakeJob, opts: { created?: boolean } = {}) {
    const jobId = `gen-vid-1-test${++n}`;
    const taskQueue = `video-workflow-test-${n}`;
    const input: VideoJobInput = { jobId, reservationId: `res-${n}`, providerId: 'simulator', duration: 4, resolution: '720p', estimate: ESTIMATE, polling: DEFAULT_VIDEO_POLLING };
    const worker = await createDomainWorker({ domain: 'media', connection: testEnv.nativeConnection, namespace: 'default', taskQueue, activities: job.activities, workflowBundle: env.bundles.media });
    const startedAt = await testEnv.currentTimeMs();
    const handle = await testEnv.client.workflow.start<typeof videoWorkflow>('videoWorkflow', { workflowId: videoWorkflowId(jobId), taskQueue, args: [input] });
    if (opts.created !== false) await handle.signal(videoCreatedSignal, { ok: true, upstreamId: UPSTREAM });
    const result = await worker.runUntil(withinRealTime(15_000, handle.result()));
    return { result, handle, startedAt, timers: await timersByRun(handle, testEnv), input };
  }

  it('a job completing after several polls: waits grow ×1.5 from 2 s and cap at 15 s, every state change recorded once, the provider cost charged', async function () {
    const job = new FakeJob(testEnv, (poll) => (poll <= 2 ? pending : poll < 8 ? working : completed('1.75')));
    const { result, timers, startedAt, input } = await runJob(job);

    assert.equal(job.polls.length, 8, 'pending twice, working to poll 7, completed at poll 8');
    assert.deepEqual(timers, [GROWING], 'one run whose waits grow x1.5 from 2 s and cap at 15 s');
    // the polls happened at those intervals of (skipped) time
    const gaps = job.polls.slice(1).map((t, i) => t - job.polls[i]);
    gaps.forEach((g, i) => assert.ok(g >= GROWING[i + 1] && g < GROWING[i + 1] + 5_000, `gap ${i}: ${g} ms`));
    assert.ok(job.polls[7] - startedAt >= sum(GROWING), `the eighth poll came after the growing waits: ${job.polls[7] - startedAt} ms`);
    assert.deepEqual(job.statuses, [
      ['in_progress', null],
      ['completed', null],
    ], 'in_progress and completed are each recorded once');
    const { reservationId, report } = job.only;
    assert.equal(reservationId, input.reservationId, "the job's own reservation is settled");
    assert.deepEqual(report.media, { billingSource: 'provider_cost', amount: '1.75' }, 'the provider cost is the billed amount');
    assert.equal(report.outcome, 'completed', 'the report says completed');
    assert.equal(report.billable, true, 'a completed job is billable');
    assert.equal(report.providerCost, '1.75', 'the provider cost is reported');
    assert.deepEqual(report.usageDetails, { seconds: 4, resolution: '720p', status: 'completed', upstream_id: UPSTREAM }, 'the usage details name the duration, resolution, status and upstream id');
    assert.deepEqual(result, { jobId: input.jobId, status: 'completed', settlement: { reservationId: input.reservationId, status: 'settled', billingSource: 'provider_cost', charge: '1.75', applied: true } }, 'the workflow returns the completed job and its settlement');
  });

  it('a provider cost arriving 4 minutes after completion: polled for over skipped minutes, then the provider cost is charged', async function () {
    let completedAt = 0;
    const job = new FakeJob(testEnv, (poll, at) => {
      if (poll < 3) return working;
      completedAt ||= at;
      return completed(at - completedAt >= 4 * MINUTE ? '3.2' : null);
    });
    const { result } = await runJob(job);

    const waited = job.only.atMs - completedAt;
    assert.ok(waited >= 4 * MINUTE && waited < 4 * MINUTE + 20_000, `settled ${waited} ms after completion`);
    assert.ok(job.polls.length > 20, `${job.polls.length} polls`);
    assert.deepEqual(job.only.report.media, { billingSource: 'provider_cost', amount: '3.2' }, 'the late provider cost is billed');
    assert.equal(job.only.report.providerCost, '3.2', 'the late provider cost is reported');
    assert.equal(result.status, 'completed', 'the job ends completed');
    assert.equal(result.settlement.charge, '3.2', 'the late provider cost is charged');
    assert.deepEqual(job.statuses, [
      ['in_progress', null],
      ['completed', null],
    ], 'in_progress and completed are each recorded once');
  });

  it('a completed job with no provider cost after lateCostWaitMs (10 min): the estimate is charged, the last wait clipped to the limit', async function () {
    let completedAt = 0;
    const job = new FakeJob(testEnv, (poll, at) => {
      if (poll < 2) return working;
      completedAt ||= at;
      return completed(null);
    });
    const { result, timers } = await runJob(job);

    const waited = job.only.atMs - completedAt;
    // workflow clock vs activity clock: may differ by a millisecond (see the continue-as-new case)
    assert.ok(waited >= 10 * MINUTE - 1_000 && waited < 10 * MINUTE + 20_000, `settled ${waited} ms after completion`);
    // after the final state the waits start again at 2 s, grow and cap, and stop at the 10 minutes
    const [run] = timers;
    const costWaits = run.slice(2);
    assert.deepEqual(costWaits.slice(0, 7), GROWING.slice(0, 7), 'the cost waits start again at 2 s and grow as before');
    assert.ok(costWaits.every((t) => t <= 15_000), `every cost wait is capped at 15 s: ${costWaits.join(', ')}`);
    assert.ok(sum(costWaits) >= 10 * MINUTE - 5_000 && sum(costWaits) <= 10 * MINUTE, `cost waits total ${sum(costWaits)} ms`);
    assert.ok(costWaits.at(-1)! < 15_000, 'the last wait is clipped to what remains of the 10 minutes');
    const { report } = job.only;
    assert.equal(report.billable, true, 'a completed job is billable even without a provider cost');
    assert.equal(report.providerCost, null, 'no provider cost came');
    assert.deepEqual(report.media, { billingSource: 'estimate', amount: ESTIMATE }, 'the estimate is billed when no cost arrives');
    assert.deepEqual(result.settlement, { reservationId: job.only.reservationId, status: 'settled', billingSource: 'estimate', charge: ESTIMATE, applied: true }, 'the estimate is charged and settled');
  });

  it('a failed job with no cost: waits unbilledCostWaitMs (1 min) for one, then bills nothing', async function () {
    let failedAt = 0;
    const job = new FakeJob(testEnv, (poll, at) => {
      if (poll < 3) return working;
      failedAt ||= at;
      return { status: 'failed', error: 'content policy', cost: null };
    });
    const { result } = await runJob(job);

    const waited = job.only.atMs - failedAt;
    assert.ok(waited >= MINUTE && waited < MINUTE + 20_000, `settled ${waited} ms after the failure`);
    assert.deepEqual(job.statuses, [
      ['in_progress', null],
      ['failed', 'content policy'],
    ], "in_progress and then failed with the provider's error are recorded once");
    const { report } = job.only;
    assert.equal(report.outcome, 'failed', 'the report says failed');
    assert.equal(report.billable, false, 'a failed job with no cost is not billable');
    assert.equal(report.error, 'content policy', "the provider's error is reported");
    assert.equal(result.settlement.status, 'released', 'the hold of an unbilled failure is released');
  });

  it('continue-as-new after pollsPerRun (200) polls: the job goes on with its state and delay carried, charged once', async function () {
    const job = new FakeJob(testEnv, (poll) => (poll < 250 ? working : completed('9.99')));
    const { result, timers, handle } = await runJob(job);

    assert.equal(job.polls.length, 250, 'working until poll 250, completed then');
    assert.equal(timers.length, 2, 'two runs');
    assert.equal(timers[0].length, 200, 'the first run stops at pollsPerRun waits');
    assert.equal(timers[1].length, 50, 'the second run makes the remaining 50 waits');
    assert.deepEqual(timers[0].slice(0, 6), GROWING.slice(0, 6), "the first run's waits grow from 2 s");
    // the second run keeps the capped delay instead of starting again at 2 s
    assert.ok(timers[1].every((t) => t === 15_000), `the second run keeps the capped 15 s delay: ${[...new Set(timers[1])].join(', ')}`);
    assert.notEqual((await handle.describe()).runId, handle.firstExecutionRunId, 'the workflow continued as new into another run');
    assert.deepEqual(job.statuses, [
      ['in_progress', null],
      ['completed', null],
    ], 'in_progress and completed are recorded once across both runs');
    assert.deepEqual(job.only.report.media, { billingSource: 'provider_cost', amount: '9.99' }, 'the provider cost is billed once after continue-as-new');
    assert.equal(result.status, 'completed', 'the job ends completed');
    assert.equal(result.settlement.charge, '9.99', 'the provider cost is charged after continue-as-new');
  });

  it('continue-as-new during the late-cost wait: the 10 minutes count from the final state, not from the new run', async function () {
    let completedAt = 0;
    const job = new FakeJob(testEnv, (poll, at) => {
      if (poll < 195) return working;
      completedAt ||= at;
      return completed(null);
    });
    const { result, timers } = await runJob(job);

    assert.equal(timers.length, 2, 'continued as new while waiting for the cost');
    assert.equal(timers[0].length, 200, 'the first run stops at pollsPerRun waits');
    // 195 waits before the polls up to the final state, then the cost waits of both runs
    const costWaits = [...timers[0].slice(195), ...timers[1]];
    assert.ok(sum(costWaits) >= 10 * MINUTE - 5_000 && sum(costWaits) <= 10 * MINUTE, `cost waits total ${sum(costWaits)} ms`);
    const waited = job.only.atMs - completedAt;
    // the workflow reads its clock at the task after the poll; the test server's clocks may differ by a millisecond
    assert.ok(waited >= 10 * MINUTE - 1_000 && waited < 10 * MINUTE + 10_000, `settled ${waited} ms after completion`);
    assert.deepEqual(job.only.report.media, { billingSource: 'estimate', amount: ESTIMATE }, 'the estimate is billed after the 10 minutes counted from the final state');
    assert.equal(result.settlement.billingSource, 'estimate', 'the estimate is charged');
  });

  it('no videoCreatedSignal within createWaitMs (3 min): the job fails, nothing is polled, the hold is released', async function () {
    const job = new FakeJob(testEnv, () => assert.fail('polled a job the provider never accepted'));
    const { result, startedAt, timers } = await runJob(job, { created: false });

    assert.equal(job.polls.length, 0, 'a job never created is never polled');
    assert.deepEqual(timers, [[3 * MINUTE]], 'one run with only the create wait of 3 minutes');
    const waited = job.only.atMs - startedAt;
    assert.ok(waited >= 3 * MINUTE && waited < 3 * MINUTE + 20_000, `failed ${waited} ms after the start`);
    assert.deepEqual(job.statuses, [['failed', 'the API did not report the provider answer to the create in time']], 'the job is recorded failed because the create was never reported');
    const { report } = job.only;
    assert.equal(report.outcome, 'failed', 'the report says failed');
    assert.equal(report.billable, false, 'a job never created is not billable');
    assert.equal(report.providerCost, null, 'no provider cost for a job never created');
    assert.deepEqual(report.media, { billingSource: 'estimate', amount: ESTIMATE }, 'the media report carries the estimate it held');
    assert.deepEqual(report.usageDetails, { seconds: 4, resolution: '720p', status: 'failed' }, 'the usage details say failed with no upstream id');
    assert.equal(result.status, 'failed', 'the job ends failed');
    assert.equal(result.settlement.status, 'released', 'the hold is released');
  });
});
