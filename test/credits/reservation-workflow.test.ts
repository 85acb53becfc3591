import assert from 'node:assert/strict';
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { LateCost, ProviderCostActivities } from '../../activities/credits/provider-cost';
import type { SettlementActivities } from '../../activities/credits/settlement';
import { ABANDONED_REPORT, reportSignal, reservationWorkflowId, type RequestReport, type ReservationInput, type SettlementResult } from '../../domain/credits/reservation';
import { createDomainWorker } from '../../workers/base';
import type { reservationWorkflow } from '../../workflows/credits/reservation';
import { createTimeSkippingEnv, startedTimers, withinRealTime } from '../helpers/time-skipping';
import { env } from '../setup/env';

// The reservation workflow on its production waits (HOLD_TIMEOUT_SECONDS 900, the upstream
// timeout of 120 s as the uncertain grace, 10 minutes for a late provider cost) on the
// time-skipping test server, with mocked activities: the timers are skipped, not shortened.

const MINUTE = 60_000;
const PRODUCTION: Omit<ReservationInput, 'reservationId'> = { holdTimeoutMs: 15 * MINUTE, uncertainGraceMs: 2 * MINUTE };
/** the late-cost waits: 1 s doubling, capped at 30 s */
const LATE_COST_WAITS = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000];

const COMPLETED: RequestReport = {
  outcome: 'completed',
  billable: true,
  usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null },
  providerCost: null,
  httpStatus: 200,
};
/** speech whose cost the provider records later: the estimate is the fallback */
const SPEECH: RequestReport = {
  outcome: 'completed',
  billable: true,
  usage: null,
  providerCost: null,
  httpStatus: 200,
  media: { billingSource: 'estimate', amount: '0.8' },
  usageDetails: { characters: 120 },
  lateCost: { providerId: 'simulator', generationId: 'gen-audio-1' },
};

interface Settled {
  reservationId: string;
  report: RequestReport;
  atMs: number;
}

/** Mocked activities: a provider answering by the test server's time, and what was settled when. */
class FakeBilling {
  readonly costFetches: number[] = [];
  readonly settled: Settled[] = [];

  constructor(
    private readonly testEnv: TestWorkflowEnvironment,
    private readonly lateCost: (atMs: number) => LateCost = () => assert.fail('fetched a late cost that was not announced'),
  ) {}

  readonly activities: ProviderCostActivities & Pick<SettlementActivities, 'settleReservation'> = {
    fetchLateCost: async (providerId: string, generationId: string): Promise<LateCost> => {
      assert.deepEqual({ providerId, generationId }, SPEECH.lateCost, 'the late cost is fetched for the generation the report announced');
      const at = await this.testEnv.currentTimeMs();
      this.costFetches.push(at);
      return this.lateCost(at);
    },
    settleReservation: async (reservationId: string, report: RequestReport): Promise<SettlementResult> => {
      this.settled.push({ reservationId, report, atMs: await this.testEnv.currentTimeMs() });
      const source = !report.billable ? 'not_billed' : (report.media?.billingSource ?? 'tokens');
      return { reservationId, status: report.billable ? 'settled' : 'released', billingSource: source, charge: report.billable ? (report.media?.amount ?? '0.00006') : '0', applied: true };
    },
  };

  get only(): Settled {
    assert.equal(this.settled.length, 1, 'settled exactly once');
    return this.settled[0];
  }
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('reservation workflow on production waits (time skipping, mocked activities)', function () {
  this.timeout(30_000);
  let testEnv: TestWorkflowEnvironment;
  let n = 0;

  before(async function () {
    testEnv = await createTimeSkippingEnv();
  });

  after(async function () {
    await testEnv?.teardown();
  });

  /**
   * Starts `reservation-<id>` as the relay does (signal-with-start with its report), or without a
   * report; `before` runs once the worker runs (skip time, signal late); the worker runs until the result.
   */
  async function runReservation(billing: FakeBilling, opts: { report?: RequestReport; before?: (h: WorkflowHandle<typeof reservationWorkflow>) => Promise<void> } = {}) {
    const reservationId = `res-${++n}`;
    const taskQueue = `reservation-workflow-test-${n}`;
    const input: ReservationInput = { reservationId, ...PRODUCTION };
    const worker = await createDomainWorker({ domain: 'credits', connection: testEnv.nativeConnection, namespace: 'default', taskQueue, activities: billing.activities, workflowBundle: env.bundles.credits });
    const startedAt = await testEnv.currentTimeMs();
    const options = { workflowId: reservationWorkflowId(reservationId), taskQueue, args: [input] as [ReservationInput] };
    const handle = opts.report
      ? await testEnv.client.workflow.signalWithStart<typeof reservationWorkflow, [RequestReport]>('reservationWorkflow', { ...options, signal: reportSignal, signalArgs: [opts.report] })
      : await testEnv.client.workflow.start<typeof reservationWorkflow>('reservationWorkflow', options);
    const result = await worker.runUntil(async () => {
      await opts.before?.(handle);
      return withinRealTime(15_000, handle.result());
    });
    return { result, reservationId, startedAt, timers: await startedTimers(handle) };
  }

  it('a reported outcome is settled at once: no timer waits beyond the report', async function () {
    const billing = new FakeBilling(testEnv);
    const { result, reservationId, startedAt, timers } = await runReservation(billing, { report: COMPLETED });

    assert.deepEqual(timers, [], 'no timer: settled without waiting');
    assert.deepEqual(billing.only.report, COMPLETED, 'settled with the reported outcome');
    assert.ok(billing.only.atMs - startedAt < 10_000, `settled ${billing.only.atMs - startedAt} ms after the start`);
    assert.deepEqual(result, { reservationId, status: 'settled', billingSource: 'tokens', charge: '0.00006', applied: true }, 'the settlement result is returned as the workflow result');
  });

  it('no report within holdTimeoutMs (15 min): the hold resolves as abandoned after the 15 minutes, not before', async function () {
    const billing = new FakeBilling(testEnv);
    const { result, startedAt, timers } = await runReservation(billing);

    assert.deepEqual(timers, [15 * MINUTE], 'one timer: the 15-minute hold timeout');
    const waited = billing.only.atMs - startedAt;
    assert.ok(waited >= 15 * MINUTE && waited < 15 * MINUTE + 10_000, `resolved ${waited} ms after the start`);
    assert.deepEqual(billing.only.report, ABANDONED_REPORT, 'settled as abandoned');
    assert.equal(result.status, 'released', 'an abandoned hold is released');
  });

  it('a report arriving 14 minutes in (skipped) still settles with that report, not as abandoned', async function () {
    const billing = new FakeBilling(testEnv);
    const { result, startedAt } = await runReservation(billing, {
      before: async (handle) => {
        await testEnv.sleep(14 * MINUTE);
        assert.equal(billing.settled.length, 0, 'still waiting for the report');
        await handle.signal(reportSignal, COMPLETED);
      },
    });

    const waited = billing.only.atMs - startedAt;
    assert.ok(waited >= 14 * MINUTE && waited < 15 * MINUTE, `settled ${waited} ms after the start`);
    assert.deepEqual(billing.only.report, COMPLETED, 'settled with the late report');
    assert.equal(result.status, 'settled', 'the late report is charged');
  });

  it('an uncertain outcome keeps the hold for uncertainGraceMs (2 min), then settles the report', async function () {
    const billing = new FakeBilling(testEnv);
    const uncertain: RequestReport = { ...COMPLETED, outcome: 'failed', billable: false, uncertain: true, usage: null, httpStatus: 504, error: 'upstream timeout' };
    const { result, startedAt, timers } = await runReservation(billing, { report: uncertain });

    assert.deepEqual(timers, [2 * MINUTE], 'one timer: the 2-minute grace');
    const waited = billing.only.atMs - startedAt;
    assert.ok(waited >= 2 * MINUTE && waited < 2 * MINUTE + 10_000, `settled ${waited} ms after the start`);
    assert.deepEqual(billing.only.report, uncertain, 'the uncertain report settled as sent');
    assert.equal(result.status, 'released', 'an uncertain failure is released');
  });

  it('a late provider cost recorded 4 minutes after the answer: polled 1 s doubling up to 30 s, then the provider cost is charged', async function () {
    const t0 = await testEnv.currentTimeMs();
    const billing = new FakeBilling(testEnv, (at) => (at - t0 >= 4 * MINUTE ? { status: 'completed', cost: '0.42', usage: { seconds: 7.5 } } : { status: 'pending' }));
    const run = await runReservation(billing, { report: SPEECH });

    const waited = billing.only.atMs - run.startedAt;
    assert.ok(waited >= 4 * MINUTE && waited < 4 * MINUTE + 30_000 + 10_000, `settled ${waited} ms after the answer`);
    assert.deepEqual(run.timers.slice(0, LATE_COST_WAITS.length), LATE_COST_WAITS, 'cost waits start at 1 s and double');
    assert.ok(run.timers.every((t) => t <= 30_000), `every cost wait is capped at 30 s: ${run.timers.join(', ')}`);
    assert.equal(billing.costFetches.length, run.timers.length + 1, 'one fetch before each wait and one after the last');
    const { report } = billing.only;
    assert.deepEqual(report.media, { billingSource: 'provider_cost', amount: '0.42' }, 'the provider cost is charged');
    assert.deepEqual(report.usageDetails, { characters: 120, seconds: 7.5 }, 'the provider usage is merged into the usage details');
    assert.equal(run.result.billingSource, 'provider_cost', 'billed from the provider cost');
    assert.equal(run.result.charge, '0.42', 'the charge is the provider cost');
  });

  it('a late cost still pending after lateCostWaitMs (10 min): the estimate is charged after the 10 minutes', async function () {
    const billing = new FakeBilling(testEnv, () => ({ status: 'pending' }));
    const { result, startedAt, timers } = await runReservation(billing, { report: SPEECH });

    assert.deepEqual(timers.slice(0, LATE_COST_WAITS.length), LATE_COST_WAITS, 'cost waits start at 1 s and double');
    assert.ok(sum(timers) >= 10 * MINUTE && sum(timers) < 10 * MINUTE + 30_000, `waits total ${sum(timers)} ms`);
    const waited = billing.only.atMs - startedAt;
    assert.ok(waited >= 10 * MINUTE && waited < 10 * MINUTE + 40_000, `settled ${waited} ms after the answer`);
    assert.deepEqual(billing.only.report, SPEECH, 'the estimate: the report as the API sent it');
    assert.equal(result.billingSource, 'estimate', 'billed from the estimate');
    assert.equal(result.charge, '0.8', 'the estimate is charged');
  });

  it('the provider completes without a cost: its usage is kept, the estimate charged', async function () {
    const t0 = await testEnv.currentTimeMs();
    const billing = new FakeBilling(testEnv, (at) => (at - t0 >= 2 * MINUTE ? { status: 'completed', cost: null, usage: { seconds: 7.5 } } : { status: 'pending' }));
    const run = await runReservation(billing, { report: SPEECH });

    assert.ok(billing.only.atMs - run.startedAt >= 2 * MINUTE, `billed after the 2-minute grace: ${billing.only.atMs - run.startedAt} ms`);
    assert.deepEqual(billing.only.report.media, SPEECH.media, 'the media charge stays the estimate');
    assert.deepEqual(billing.only.report.usageDetails, { characters: 120, seconds: 7.5 }, 'the provider usage is kept');
    assert.equal(run.result.billingSource, 'estimate', 'billed from the estimate');
  });

  it('an uncertain outcome with a late cost: the grace first, then the cost wait', async function () {
    const t0 = await testEnv.currentTimeMs();
    const billing = new FakeBilling(testEnv, (at) => (at - t0 >= 3 * MINUTE ? { status: 'completed', cost: '0.5', usage: {} } : { status: 'pending' }));
    const run = await runReservation(billing, { report: { ...SPEECH, uncertain: true } });

    assert.equal(run.timers[0], 2 * MINUTE, 'the first timer is the 2-minute grace');
    assert.ok(billing.costFetches[0] - run.startedAt >= 2 * MINUTE, 'no fetch during the grace');
    assert.deepEqual(run.timers.slice(1, 4), LATE_COST_WAITS.slice(0, 3), 'then the cost waits, from 1 s doubling');
    assert.ok(billing.only.atMs - run.startedAt >= 3 * MINUTE, `billed after the grace and the first waits: ${billing.only.atMs - run.startedAt} ms`);
    assert.deepEqual(billing.only.report.media, { billingSource: 'provider_cost', amount: '0.5' }, 'the provider cost is charged');
  });
});
