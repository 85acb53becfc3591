import Decimal from 'decimal.js';
import { GatewayError } from '../../domain/shared/errors';
import { normalize, type Credits, type Tariff } from '../../domain/credits/pricing';
import type { RequestReport } from '../../domain/credits/reservation';
import { runPrepared, type Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { HOLD_BATCH, HOLD_ONE, holdAlone, holdElement, holdOneValues, type HoldTerms, type HoldVerdict } from './hold-statement';
import { GroupCommit } from './group-commit';
import { recordOutcomes, type OutcomeWrite, type Recorded } from './outbox';
import type { OutcomeLine } from './outcome-line';
import { JOURNAL_DEFAULTS, OutcomeJournal } from './outcome-journal';
import { Counter } from 'prom-client';
import { registry } from '../../platform/metrics';
import { currentTraceparent } from '../../platform/tracing';


/** Hold attempts by model and provider (catalog entries: bounded) and result. */
const holdsTaken = new Counter({ name: 'credits_hold_attempts_total', help: 'Hold attempts by model, provider and result (taken, insufficient_quota, spend_limit)', labelNames: ['model', 'provider', 'result'] as const, registers: [registry] });

/** What a caller asks to hold: the hold's terms (hold-statement.ts), with the rest defaulted. */
export type HoldRequest = Omit<HoldTerms, 'modality' | 'ownerWorkflowId' | 'processId' | 'trackKeySpend'> & {
  /**
   * Also add the hold to the key's spend, conditional on its spend limit, in the same statement
   * (keyed variant, spec 3 A). Defaults to the Reservations option of the same name.
   */
  trackKeySpend?: boolean;
  /** text (default), image, audio or video */
  modality?: string;
  /**
   * The workflow that resolves this hold when it is not the reservation workflow (a video job's
   * own workflow): then no reservation workflow starts and `report` must not be used.
   */
  ownerWorkflowId?: string;
};

export interface Hold {
  reservationId: string;
  held: Credits;
  balanceBefore: Credits;
  tariff: Tariff;
  complimentary: boolean;
  /** Records the outcome; the settlement relay hands it to a workflow, which settles the hold. */
  report(r: RequestReport): Promise<void>;
}

/**
 * Takes holds (one conditional statement: the balance check, the account update, the
 * reservation row and the ledger row together) and records each outcome for settlement.
 */
/** Says which happened: the limit is used up, or only this request's hold does not fit. */
function spendLimitRefusal(limit: string, needed: string, remaining: string): GatewayError {
  const detail = new Decimal(remaining).isZero()
    ? `This API key has reached its spend limit of ${limit}.`
    : `This request's hold of ${needed} does not fit in the ${remaining} left of this API key's spend limit of ${limit}. ` +
      "The hold is sized for max_tokens (or the model's maximum output when absent); a smaller max_tokens makes a smaller hold.";
  return new GatewayError('key_spend_limit_exceeded', { detail, limit, needed, remaining });
}

export class Reservations {
  /** This process's holds, one batch statement at a time (group commit, DESIGN.md §2). */
  private readonly holds: GroupCommit<HoldTerms, HoldVerdict>;
  /** This process's outcome writes, batched the same way, on the outcome line when it is up. */
  private readonly outcomes: GroupCommit<OutcomeWrite, Recorded | null>;
  private readonly journal: OutcomeJournal;

  constructor(
    private readonly db: Db,
    private readonly opts: {
      logger: Logger;
      trackKeySpend?: boolean;
      /** this API process (api_processes): its holds are released only once it is dead */
      processId?: string;
      /** outcomes leave the process synchronously, before the answer's last byte (services/credits/outcome-line.ts) */
      outcomeLine?: OutcomeLine;
      /**
       * A connection of the holds' own (one batch statement in flight at a time): no pool acquire and
       * release on the client's way (about 40 µs of a c=1 request's hold); while it is down, the pool.
       */
      holdLine?: OutcomeLine;
      /** where outcomes PostgreSQL cannot take wait (services/credits/outcome-journal.ts); default: in memory */
      journal?: OutcomeJournal;
    },
  ) {
    this.journal = opts.journal ?? new OutcomeJournal(db, opts.logger, { dir: null, ...JOURNAL_DEFAULTS });
    this.holds = new GroupCommit((batch) => this.takeHolds(batch));
    this.outcomes = new GroupCommit((batch) => recordOutcomes(this.db, batch, this.opts.outcomeLine), { intervalMs: this.journal.batchIntervalMs });
  }

  /** Writes the outcomes still queued (a process that stops) and waits for those in flight. */
  flushOutcomes(): Promise<void> {
    return this.outcomes.flush();
  }

  /**
   * One statement decides the whole batch in arrival order. A batch of holds settled from a
   * report commits without waiting for the disk: a PostgreSQL crash that loses it is repaired by
   * the outcome write (services/credits/outbox.ts). A hold resolved by a workflow of its own
   * (video) has no outcome write to repair it: its batch commits durably.
   */
  private async takeHolds(batch: HoldTerms[]): Promise<HoldVerdict[]> {
    const durable = batch.some((t) => t.ownerWorkflowId !== null);
    const [statement, values] = holdAlone(batch) ? [HOLD_ONE, holdOneValues(batch[0], durable)] : [HOLD_BATCH, [JSON.stringify(batch.map((t, i) => holdElement(t, i))), false, durable]];
    const res = await (this.opts.holdLine?.send(statement, values) ?? runPrepared(this.db, statement, values));
    return res.rows as unknown as HoldVerdict[];
  }

  async hold(h: HoldRequest): Promise<Hold> {
    const count = (result: string) => holdsTaken.inc({ model: h.model, provider: h.provider, result });
    if (!this.journal.admits()) {
      throw new GatewayError('service_unavailable', { detail: `This gateway process holds ${this.journal.depth} outcomes the database has not taken yet (its outcome journal is full); it takes new requests once they are written. Retry shortly.` }, { 'retry-after': '5' });
    }
    const terms = this.termsOf(h);
    const row = await this.holds.submit(terms);
    if (row.verdict === 'spend_limit') {
      count('spend_limit');
      throw spendLimitRefusal(normalize(row.spend_limit ?? '0'), normalize(h.held), normalize(row.key_remaining ?? '0'));
    }
    if (row.verdict !== 'taken') {
      count('insufficient_quota');
      throw new GatewayError('insufficient_quota', { needed: normalize(h.held), balance: normalize(row.balance ?? '0') });
    }
    count('taken');
    // Captured in the request's context: the outcome is recorded with it for the settlement's span link.
    const trace = currentTraceparent();
    return {
      reservationId: h.reservationId,
      held: h.held,
      balanceBefore: row.balance_before!,
      tariff: h.tariff,
      complimentary: h.complimentary,
      report: (r) => this.report(terms, trace ? { ...r, trace } : r),
    };
  }

  /** What the hold statement writes for this request (and the outcome write needs to write again). */
  private termsOf(h: HoldRequest): HoldTerms {
    return {
      reservationId: h.reservationId,
      accountId: h.accountId,
      keyId: h.keyId,
      model: h.model,
      provider: h.provider,
      endpoint: h.endpoint,
      tariff: h.tariff,
      held: h.held,
      complimentary: h.complimentary,
      modality: h.modality ?? 'text',
      ownerWorkflowId: h.ownerWorkflowId ?? null,
      processId: this.opts.processId ?? null,
      trackKeySpend: h.trackKeySpend ?? this.opts.trackKeySpend ?? false,
    };
  }

  /**
   * Records the outcome on the reservation row (the outbox, services/credits/outbox.ts): a durable
   * commit, before anything depends on Temporal. It carries the hold's terms, so a hold that a
   * PostgreSQL crash lost is written again with it. With an outcome line, no outcome batch of this
   * process in flight and none sent in the journal's batch interval, the statement has left the
   * process when this returns its promise (the API reports before it ends the answer); else the
   * outcome is spooled before this returns and leaves with the next batch. The body id is readable
   * by /v1/generation from then on. An outcome
   * the database does not take goes to the outcome journal, which replays it until it does; while
   * outcomes wait there, or no outcome-line connection is up (the database is down), a new one is
   * appended (fsynced) at once, before the answer ends.
   */
  private async report(t: HoldTerms, r: RequestReport): Promise<void> {
    if (t.ownerWorkflowId) throw new Error(`hold ${t.reservationId} is resolved by ${t.ownerWorkflowId}, not by a report`);
    const write = { reservationId: t.reservationId, report: r, lost: t };
    if (this.journal.depth > 0 || this.opts.outcomeLine?.connected === false) return this.journal.append(write);
    const recording = this.outcomes.submit(write);
    // not on its way to PostgreSQL yet (waiting for its batch, or no outcome line): spooled before the answer ends
    const spooled = this.outcomes.waiting > 0 || !this.opts.outcomeLine ? this.journal.spool(write) : () => {};
    try {
      const recorded = await recording;
      if (recorded === 'recreated') this.opts.logger.warn({ reservation: t.reservationId }, 'the hold was lost (a PostgreSQL crash); written again with its outcome');
    } catch (err) {
      this.opts.logger.warn({ err, reservation: t.reservationId }, 'could not record the outcome; it waits in the outcome journal');
      return this.journal.append(write);
    } finally {
      spooled();
    }
  }
}
