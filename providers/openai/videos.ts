import { Agent, request, type Dispatcher } from 'undici';
import type { Provider } from '../../domain/catalog/model';
import type { VideoStatus } from '../../domain/media/video';
import type { ProviderVideoObject, VideoCreate } from '../endpoints';
import { openaiChat } from './chat';

// OpenAI video jobs (POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content): the
// request and response transforms, and the two GETs (the create goes through postUpstream).

export const VIDEO_CREATE_PATH = 'v1/videos';

const agent = new Agent({ keepAliveTimeout: 30_000, connections: 128, pipelining: 1 });

/** The upstream body: OpenAI names the duration `seconds`; provider options merge in as given. */
export function videoCreateBody(req: VideoCreate, upstreamModel: string, previousUpstreamId: string | null): Record<string, unknown> {
  const options = (req.provider?.options?.openai ?? {}) as Record<string, unknown>;
  const body: Record<string, unknown> = {
    ...options,
    model: upstreamModel,
    prompt: req.prompt,
    seconds: String(req.duration),
    resolution: req.resolution,
    aspect_ratio: req.aspect_ratio,
    size: req.size,
    frame_images: req.frame_images,
    input_references: req.input_references,
    generate_audio: req.generate_audio,
    seed: req.seed,
    remix_video_id: previousUpstreamId ?? undefined,
  };
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return body;
}

const STATUS: Record<string, VideoStatus> = {
  queued: 'pending',
  pending: 'pending',
  in_progress: 'in_progress',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
  expired: 'expired',
};

/** The provider's video object → status, error and its cost in the provider's currency. */
export function parseVideoObject(json: Record<string, unknown>): ProviderVideoObject {
  const status = STATUS[String(json.status)];
  if (!status || typeof json.id !== 'string') throw new Error(`unexpected video object from the provider: status ${String(json.status)}`);
  const err = json.error as { message?: string; code?: string } | null | undefined;
  const cost = typeof json.cost === 'number' || typeof json.cost === 'string' ? json.cost : null;
  return { id: json.id, status, error: err ? (err.message ?? err.code ?? 'failed') : status === 'failed' ? 'the provider reported a failure' : null, cost };
}

const auth = (provider: Provider): Record<string, string> => (provider.api_keys[0] ? openaiChat.authHeaders(provider.api_keys[0]) : {});

/** GET /v1/videos/{id}: the job as the provider sees it now. */
export async function fetchVideo(provider: Provider, upstreamId: string, timeoutMs = 10_000): Promise<Dispatcher.ResponseData> {
  return request(new URL(`v1/videos/${encodeURIComponent(upstreamId)}`, provider.base_url), {
    dispatcher: agent,
    headers: auth(provider),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}

/** GET /v1/videos/{id}/content, passing the client's Range through. */
export async function fetchVideoContent(provider: Provider, upstreamId: string, range: string | undefined, signal: AbortSignal, timeoutMs: number): Promise<Dispatcher.ResponseData> {
  return request(new URL(`v1/videos/${encodeURIComponent(upstreamId)}/content?variant=video`, provider.base_url), {
    dispatcher: agent,
    headers: { ...auth(provider), ...(range ? { range } : {}) },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal,
  });
}
