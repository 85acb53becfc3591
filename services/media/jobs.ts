import { isTerminal, VIDEO_JOB_ID, type VideoStatus } from '../../domain/media/video';
import type { Db } from '../../platform/db';

// Video job rows (spec 1 section 3.1): the API creates them; the job's workflow moves their
// status on (activities/media/video.ts). A job is only ever read through its account.

/** A job with its reservation's charge, as the status read shows it. */
export interface JobRow {
  id: string;
  key_id: string;
  model: string;
  provider_id: string;
  upstream_id: string | null;
  status: string;
  error: string | null;
  duration: number;
  resolution: string;
  content_count: number;
  created_at: Date;
  finished_at: Date | null;
  reservation_id: string;
  r_status: string;
  billing_source: string | null;
  is_estimate: boolean | null;
  charge: string | null;
  held_credits: string;
  balance_before: string;
}

/** The job if it exists on this account, else undefined (an id of another account is not found either). */
export async function findJob(db: Db, accountId: string, id: string): Promise<JobRow | undefined> {
  if (!VIDEO_JOB_ID.test(id)) return undefined;
  return db('video_jobs as j')
    .join('reservations as r', 'r.id', 'j.reservation_id')
    .where({ 'j.id': id, 'j.account_id': accountId })
    .first('j.*', 'r.status as r_status', 'r.billing_source', 'r.is_estimate', 'r.charge', 'r.held_credits', 'r.balance_before');
}

/** The provider's id of a completed job of this account and model, for `previous_job_id`; null when there is none. */
export async function completedUpstreamId(db: Db, accountId: string, jobId: string, model: string): Promise<string | null> {
  const prev = await db('video_jobs').where({ id: jobId, account_id: accountId }).first('status', 'model', 'upstream_id');
  return prev && prev.status === 'completed' && prev.model === model ? prev.upstream_id : null;
}

export interface NewJob {
  id: string;
  accountId: string;
  keyId: string;
  reservationId: string;
  model: string;
  providerId: string;
  duration: number;
  resolution: string;
}

/** The job row and its first event (`pending`), together. */
export async function insertJob(db: Db, j: NewJob): Promise<void> {
  await db.transaction(async (trx) => {
    await trx('video_jobs').insert({
      id: j.id,
      account_id: j.accountId,
      key_id: j.keyId,
      reservation_id: j.reservationId,
      model: j.model,
      provider_id: j.providerId,
      duration: j.duration,
      resolution: j.resolution,
    });
    await trx('video_job_events').insert({ job_id: j.id, status: 'pending' });
  });
}

export async function setUpstreamId(db: Db, jobId: string, upstreamId: string): Promise<void> {
  await db('video_jobs').where({ id: jobId }).update({ upstream_id: upstreamId });
}

/** What an idempotent replay answers: the job and the request id of its reservation. */
export async function jobSummary(db: Db, jobId: string): Promise<{ id: string; reservation_id: string; status: string }> {
  return db('video_jobs').where({ id: jobId }).first('id', 'reservation_id', 'status');
}

/** Moves the job to `status` unless it is there already or final; one event row per real move. */
export async function recordJobStatus(db: Db, jobId: string, status: VideoStatus, error: string | null): Promise<boolean> {
  const res = await db.raw(
    `WITH j AS (
       UPDATE video_jobs SET status = :status, error = COALESCE(:error, error), updated_at = now(),
         finished_at = CASE WHEN :terminal THEN now() ELSE finished_at END
       WHERE id = :id AND status <> :status AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')
       RETURNING id
     ), e AS (
       INSERT INTO video_job_events (job_id, status, error) SELECT id, :status, :error FROM j
     )
     SELECT count(*)::int AS n FROM j`,
    { id: jobId, status, error: status === 'completed' ? null : error, terminal: isTerminal(status) },
  );
  return res.rows[0].n === 1;
}
