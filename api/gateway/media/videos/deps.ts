import type { Client } from '@temporalio/client';
import type { VideoPolling } from '../../../../domain/media/video';
import type { Db } from '../../../../platform/db';
import type { Catalog } from '../../../../services/catalog/catalog';
import type { Reservations } from '../../../../services/credits/holds';

/** What the video routes need; the gateway's deps fit, and tests may add the optional parts. */
export interface VideoDeps {
  db: Db;
  temporal: Client;
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
  /** task queue of the video job workflows; default `media` */
  mediaTaskQueue?: string;
  /** polling intervals handed to each job's workflow; defaults in DEFAULT_VIDEO_POLLING */
  videoPolling?: Partial<VideoPolling>;
  /** least time between two status polls of one job by one key; default 1000 ms */
  videoPollIntervalMs?: number;
}
