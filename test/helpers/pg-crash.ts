import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../../platform/db';

// What a PostgreSQL crash does to a hold, two ways: for real (kill -9 of the server and every
// process of it, so nothing is flushed on the way out) and simulated (the rows of one hold gone
// and its account and key columns back as they were: exactly what an unflushed commit that is
// lost looks like after recovery).

const alive = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat); // a zombie has exited
  } catch {
    return false;
  }
};

function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * kill -9 of the PostgreSQL cluster in `dataDir`: the postmaster (from its postmaster.pid) and
 * every process it started, at once. Resolves once they are all gone; returns their pids.
 */
export async function killPostgres(dataDir: string, timeoutMs = 10_000): Promise<number[]> {
  const postmaster = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0].trim());
  if (!Number.isInteger(postmaster) || postmaster <= 1) throw new Error(`no postmaster pid in ${dataDir}`);
  const pids = [postmaster, ...childrenOf(postmaster)];
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  const deadline = Date.now() + timeoutMs;
  while (pids.some(alive)) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL processes still alive after kill -9: ${pids.filter(alive).join(' ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return pids;
}

/**
 * Simulates the loss of a hold's commit in a crash: its ledger rows and reservation row deleted,
 * the account's usage, reserved credits and pending count (and the key's spend, when the hold took
 * part in it) back to what they were before the hold. For a hold without an outcome only.
 */
export async function loseHold(db: Db, reservationId: string): Promise<void> {
  await db.transaction(async (trx) => {
    const r = await trx('reservations').where({ id: reservationId }).forUpdate().first();
    if (!r) throw new Error(`reservation ${reservationId} not found`);
    const recorded = await trx('settlement_outbox').where({ reservation_id: reservationId }).first();
    if (r.status !== 'held' || recorded) throw new Error(`reservation ${reservationId} is not a bare hold (${r.status})`);
    if (r.key_spend_tracked) await trx.raw('UPDATE api_keys SET spend = spend - ? WHERE id = ?', [r.held_credits, r.key_id]);
    await trx.raw(
      `UPDATE accounts SET total_usage = total_usage - :held, reserved_credits = reserved_credits - :held, pending_requests = pending_requests - 1
       WHERE id = :account`,
      { held: r.held_credits, account: r.account_id },
    );
    await trx('ledger').where({ reservation_id: reservationId }).delete();
    await trx('reservations').where({ id: reservationId }).delete();
  });
}
