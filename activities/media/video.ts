import type { Provider } from '../../domain/catalog/model';
import { convertProviderCost } from '../../domain/credits/pricing';
import { type ProviderVideo, type VideoStatus } from '../../domain/media/video';
import type { Db } from '../../platform/db';
import { findProvider } from '../../services/catalog/catalog';
import { recordJobStatus } from '../../services/media/jobs';
import { providerFor } from '../../providers';

export interface VideoActivityDeps {
  db: Db;
  /** how long a provider row is reused before it is read again */
  providerTtlMs?: number;
}

/**
 * Activities of the video job workflow: read the provider's view of a job (a pure read, safe to
 * repeat) and record a state change (a conditional update, so repeats change nothing).
 */
export function createVideoActivities(deps: VideoActivityDeps) {
  const ttl = deps.providerTtlMs ?? 30_000;
  const providers = new Map<string, { at: number; provider: Provider }>();

  async function providerOf(id: string): Promise<Provider> {
    const hit = providers.get(id);
    if (hit && Date.now() - hit.at < ttl) return hit.provider;
    const provider = await findProvider(deps.db, id);
    if (!provider) throw new Error(`provider ${id} not found`);
    providers.set(id, { at: Date.now(), provider });
    return provider;
  }

  async function pollVideo(providerId: string, upstreamId: string): Promise<ProviderVideo> {
    const provider = await providerOf(providerId);
    const videos = providerFor(provider.kind, 'videos');
    if (!videos) throw new Error(`provider ${providerId} (${provider.kind}) has no video jobs`);
    const res = await videos.fetchJob(provider, upstreamId);
    if (res.statusCode === 404) {
      // The provider no longer knows the job: it will never finish, and charged nothing we can see.
      await res.body.dump();
      return { status: 'expired', error: 'the provider no longer holds this job', cost: null };
    }
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new Error(`provider answered ${res.statusCode} for video ${upstreamId}`);
    }
    const v = videos.parseJob((await res.body.json()) as Record<string, unknown>);
    const cost = v.cost === null ? null : convertProviderCost(v.cost, provider.credits_per_cost_unit);
    return { status: v.status, error: v.error, cost };
  }

  const recordVideoStatus = (jobId: string, status: VideoStatus, error: string | null) => recordJobStatus(deps.db, jobId, status, error);

  return { pollVideo, recordVideoStatus };
}

export type VideoActivities = ReturnType<typeof createVideoActivities>;
