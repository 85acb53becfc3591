// Asynchronous video jobs. A job is a small record of timestamps and settings; its state at
// any moment is derived from the clock (no timers per job), so 10,000 jobs in flight cost a
// Map entry each. The Map is capped: beyond CAP the oldest finished job goes (the oldest job
// of all when none of the oldest 64 finished).
import { randomUUID } from 'node:crypto';
import type { MediaCost } from './generations';
import type { VideoOutcome } from './media-behaviour';

export type VideoStatus = 'queued' | 'in_progress' | VideoOutcome;

export interface VideoJob {
  id: string;
  model: string;
  key: string | null;
  createdAt: number;
  renderMs: number;
  outcome: VideoOutcome;
  /** The `cost` control: undefined = auto when completed, else none. */
  cost: MediaCost;
  costDelay: number;
  contentTtl: number | null;
  contentBytes: number;
  seconds: number;
  size: string;
  seed: number;
  /** Set by DELETE while the job was not finished. */
  cancelledAt: number | null;
  polls: number;
  downloads: number;
}

export interface JobView {
  status: VideoStatus;
  progress: number;
  /** ms of the final state, or null while running. */
  finishedAt: number | null;
  /** USD charged, or null (none, or not visible yet at this moment). */
  cost: number | null;
  /** ms when the cost becomes visible, or null when the provider charges nothing. */
  costAt: number | null;
  /** ms when the content stops being served, or null. */
  contentExpiresAt: number | null;
}

const CAP = 50_000;
const EVICTION_SCAN = 64;
const AUTO_COST_PER_SECOND = 0.05;

export type NewJob = Omit<VideoJob, 'id' | 'createdAt' | 'seed' | 'cancelledAt' | 'polls' | 'downloads'>;

export class VideoJobs {
  private jobs = new Map<string, VideoJob>();

  create(settings: NewJob): VideoJob {
    const hex = randomUUID().replace(/-/g, '');
    const id = `video_${hex}`;
    const job: VideoJob = { ...settings, id, createdAt: Date.now(), seed: Number.parseInt(hex.slice(0, 8), 16) | 0, cancelledAt: null, polls: 0, downloads: 0 };
    this.jobs.set(id, job);
    if (this.jobs.size > CAP) this.evict();
    return job;
  }

  get(id: string): VideoJob | undefined {
    return this.jobs.get(id);
  }

  get size(): number {
    return this.jobs.size;
  }

  clear(): void {
    this.jobs.clear();
  }

  all(): IterableIterator<VideoJob> {
    return this.jobs.values();
  }

  private evict(): void {
    const now = Date.now();
    let scanned = 0;
    for (const job of this.jobs.values()) {
      if (finished(job, now)) {
        this.jobs.delete(job.id);
        return;
      }
      if (++scanned >= EVICTION_SCAN) break;
    }
    const oldest = this.jobs.keys().next();
    if (!oldest.done) this.jobs.delete(oldest.value);
  }
}

function finished(job: VideoJob, now: number): boolean {
  return job.cancelledAt !== null || now >= job.createdAt + job.renderMs;
}

/** Ends a running job as `cancelled` (DELETE); a finished job stays as it is. */
export function cancel(job: VideoJob, now: number): void {
  if (!finished(job, now)) job.cancelledAt = now;
}

function chargedCost(job: VideoJob, status: VideoStatus): number | null {
  if (job.cost === 'none') return null;
  if (job.cost === undefined) return status === 'completed' ? Math.round(job.seconds * AUTO_COST_PER_SECOND * 100) / 100 : null;
  return job.cost === 'auto' ? Math.round(job.seconds * AUTO_COST_PER_SECOND * 100) / 100 : job.cost;
}

/** The job as it is at `now`: queued for the first 10 % of render_ms, then in_progress, then final. */
export function viewOf(job: VideoJob, now: number): JobView {
  const renderEnd = job.createdAt + job.renderMs;
  const finishedAt = job.cancelledAt ?? (now >= renderEnd ? renderEnd : null);
  const progressAt = (t: number): number => (job.renderMs === 0 ? 99 : Math.min(99, Math.floor((100 * (t - job.createdAt)) / job.renderMs)));
  if (finishedAt === null) {
    const inProgress = now >= job.createdAt + job.renderMs / 10;
    return { status: inProgress ? 'in_progress' : 'queued', progress: inProgress ? progressAt(now) : 0, finishedAt, cost: null, costAt: null, contentExpiresAt: null };
  }
  const status: VideoStatus = job.cancelledAt !== null ? 'cancelled' : job.outcome;
  const charged = chargedCost(job, status);
  const costAt = charged === null ? null : finishedAt + job.costDelay;
  return {
    status,
    progress: status === 'completed' ? 100 : progressAt(finishedAt),
    finishedAt,
    cost: costAt !== null && now >= costAt ? charged : null,
    costAt,
    contentExpiresAt: status === 'completed' && job.contentTtl !== null ? finishedAt + job.contentTtl : null,
  };
}

const unix = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

/** The OpenAI-style video object. */
export function videoObject(job: VideoJob, now: number): Record<string, unknown> {
  const v = viewOf(job, now);
  return {
    id: job.id,
    object: 'video',
    model: job.model,
    status: v.status,
    progress: v.progress,
    created_at: unix(job.createdAt),
    completed_at: v.status === 'completed' ? unix(v.finishedAt) : null,
    expires_at: unix(v.contentExpiresAt),
    seconds: String(job.seconds),
    size: job.size,
    error: v.status === 'failed' ? { code: 'video_generation_failed', message: 'Simulated render failure.' } : null,
    ...(v.cost === null ? {} : { cost: v.cost }),
  };
}

/** `GET /_sim/videos/{id}`: the job's settings and derived state, times in ms. */
export function internalState(job: VideoJob, now: number): Record<string, unknown> {
  const v = viewOf(job, now);
  return {
    id: job.id,
    model: job.model,
    key: job.key,
    status: v.status,
    progress: v.progress,
    outcome: job.outcome,
    created_at_ms: job.createdAt,
    in_progress_at_ms: job.createdAt + job.renderMs / 10,
    render_ms: job.renderMs,
    cancelled_at_ms: job.cancelledAt,
    finished_at_ms: v.finishedAt,
    cost_control: job.cost ?? null,
    cost_delay_ms: job.costDelay,
    cost_at_ms: v.costAt,
    cost: v.cost,
    content_ttl_ms: job.contentTtl,
    content_expires_at_ms: v.contentExpiresAt,
    content_bytes: job.contentBytes,
    seconds: job.seconds,
    size: job.size,
    polls: job.polls,
    downloads: job.downloads,
    now_ms: now,
  };
}
