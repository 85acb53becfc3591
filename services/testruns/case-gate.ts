import { FINAL_STATUSES } from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';

/**
 * The concurrency gate: a counting semaphore in PostgreSQL, shared by every run and every worker
 * process. A slot is a lease row keyed by (run, case), so a retried or re-delivered execution of
 * the same case finds its own slot again instead of taking a second one. A lease counts while
 * `expires_at` is in the future: the executing activity renews it with its heartbeats, and the
 * slot of a crashed worker returns by itself after `leaseTtlMs`.
 *
 * Claims are serialised by one transaction-scoped advisory lock, so the count and the insert
 * cannot interleave with another claim (no over-admission under READ COMMITTED).
 */
export interface GateLimits {
  /** case executions at once over all projects */
  globalLimit: number;
  leaseTtlMs: number;
}

const GATE_LOCK = 'test-run-case-gate';
const FINAL = new Set<string>(FINAL_STATUSES);

export class CaseGate {
  constructor(
    private readonly db: Db,
    private readonly limits: GateLimits,
  ) {}

  /**
   * Takes (or keeps) the slot of this case if its project and the whole system have room.
   * `final`: the run has ended; it gets no slot and its case will not execute.
   */
  async claim(runId: string, caseId: string): Promise<'granted' | 'busy' | 'final'> {
    return this.db.transaction(async (trx) => {
      await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [GATE_LOCK]);
      const ttl = `${this.limits.leaseTtlMs} milliseconds`;
      const kept = await trx('test_case_leases')
        .where({ run_id: runId, case_id: caseId })
        .andWhere('expires_at', '>', trx.fn.now())
        .update({ expires_at: trx.raw('now() + ?::interval', [ttl]) });
      if (kept > 0) return 'granted';
      const r = await trx.raw(
        `SELECT p.id AS project_id, p.max_concurrency, r.status,
           (SELECT count(*)::int FROM test_case_leases l WHERE l.project_id = p.id AND l.expires_at > now()) AS project_busy,
           (SELECT count(*)::int FROM test_case_leases l WHERE l.expires_at > now()) AS global_busy
         FROM test_runs r JOIN test_projects p ON p.id = r.project_id WHERE r.id = ?`,
        [runId],
      );
      const g = r.rows[0];
      if (!g) throw new Error(`run ${runId} not found`);
      // A finished run holds no slot, even if a straggling activity of it asks for one.
      if (FINAL.has(g.status)) return 'final';
      if (g.project_busy >= g.max_concurrency || g.global_busy >= this.limits.globalLimit) return 'busy';
      await trx.raw(
        `INSERT INTO test_case_leases (run_id, case_id, project_id, acquired_at, expires_at)
         VALUES (?, ?, ?, now(), now() + ?::interval)
         ON CONFLICT (run_id, case_id) DO UPDATE SET acquired_at = now(), expires_at = EXCLUDED.expires_at`,
        [runId, caseId, g.project_id, ttl],
      );
      // Long-expired leases of runs that never released them.
      await trx('test_case_leases').where('expires_at', '<', trx.raw("now() - interval '1 hour'")).delete();
      return 'granted';
    });
  }

  /** Extends this case's lease; false when it had expired and the slot could not be taken again. */
  async renew(runId: string, caseId: string): Promise<boolean> {
    const n = await this.db('test_case_leases')
      .where({ run_id: runId, case_id: caseId })
      .andWhere('expires_at', '>', this.db.fn.now())
      .update({ expires_at: this.db.raw('now() + ?::interval', [`${this.limits.leaseTtlMs} milliseconds`]) });
    return n > 0 || (await this.claim(runId, caseId)) === 'granted';
  }

  async release(runId: string, caseId: string): Promise<void> {
    await this.db('test_case_leases').where({ run_id: runId, case_id: caseId }).delete();
  }
}
