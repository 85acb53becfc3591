// Video endpoints: POST /v1/videos (create), GET /v1/videos/{id} (poll), DELETE /v1/videos/{id}
// (cancel), GET /v1/videos/{id}/content (bytes with Range support), and GET /_sim/videos/{id}.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { drained, sendError, sendJson } from './http';
import { imageBytes, videoSlice } from './media-bytes';
import type { MediaBehaviour } from './media-behaviour';
import { invalid, isInvalid, mediaFaults, need, read, readMedia, sendInvalid, sendMediaPlain, validate, type Invalid } from './media-endpoint';
import type { SimState } from './state';
import { cancel, internalState, videoObject, viewOf, type NewJob, type VideoJob } from './video-jobs';

const DEFAULT_RENDER_MS = 3000;
const DEFAULT_CONTENT_BYTES = 256 * 1024;
const DEFAULT_SECONDS = 4;
const SEND_CHUNK = 64 * 1024;

interface CreateRequest {
  model: string;
  prompt: string;
  seconds: number;
  size: string;
}

/** `720p` + `16:9` → `1280x720`; without a resolution the default portrait 720x1280. */
function sizeFrom(resolution: string | undefined, aspect: string | undefined): string {
  const height = resolution ? Number.parseInt(resolution, 10) : NaN;
  const ratio = /^(\d+):(\d+)$/.exec(aspect ?? '');
  if (!Number.isFinite(height) || height <= 0) return '720x1280';
  const [w, h] = ratio ? [Number(ratio[1]), Number(ratio[2])] : [16, 9];
  if (w <= 0 || h <= 0) return '720x1280';
  return w >= h ? `${Math.round((height * w) / h)}x${height}` : `${height}x${Math.round((height * h) / w)}`;
}

function parseCreate(body: Record<string, unknown>, hasFile: boolean): CreateRequest | Invalid {
  return validate(() => {
    const model = need(read.str(body, 'model'));
    if (!model) return invalid("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
    const prompt = need(read.str(body, 'prompt'));
    const references = ['input_reference', 'input_references', 'frame_images'].some((k) => body[k] !== undefined && body[k] !== null);
    if (!prompt && !references && !hasFile) return invalid("Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
    const seconds = need(read.int(body, 'seconds', 1, 600)) ?? need(read.int(body, 'duration', 1, 600)) ?? DEFAULT_SECONDS;
    const size = need(read.str(body, 'size'));
    if (size !== undefined && !/^\d{1,5}x\d{1,5}$/.test(size)) return invalid(`Invalid value for 'size': '${size}'.`, 'size', 'invalid_value');
    const resolution = need(read.str(body, 'resolution'));
    const aspect = need(read.str(body, 'aspect_ratio'));
    need(read.bool(body, 'generate_audio'));
    need(read.int(body, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    if (body.frame_images !== undefined && body.frame_images !== null && !Array.isArray(body.frame_images)) {
      return invalid("Invalid type for 'frame_images': expected an array.", 'frame_images', 'invalid_type');
    }
    return { model, prompt: prompt ?? '', seconds, size: size ?? sizeFrom(resolution, aspect) };
  });
}

function settings(request: CreateRequest, behaviour: MediaBehaviour, key: string | null): NewJob {
  return {
    model: request.model,
    key,
    renderMs: behaviour.render_ms ?? DEFAULT_RENDER_MS,
    outcome: behaviour.outcome ?? 'completed',
    cost: behaviour.cost,
    costDelay: behaviour.cost_delay ?? 0,
    contentTtl: behaviour.content_ttl_ms ?? null,
    contentBytes: behaviour.content_bytes ?? DEFAULT_CONTENT_BYTES,
    seconds: request.seconds,
    size: request.size,
  };
}

export async function serveVideoCreate(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const input = await readMedia(req, res, state, '/v1/videos', true);
  if (!input) return;
  const request = parseCreate(input.body, input.files.some((f) => f.field === 'input_reference'));
  if (isInvalid(request)) return sendInvalid(res, request);
  const behaviour = await mediaFaults(req, res, state, { key: input.key, model: request.model, text: request.prompt });
  if (!behaviour) return;
  // The job exists even when drop_after loses the answer, as with a real provider.
  const job = state.videos.create(settings(request, behaviour, input.key));
  const created = { ...videoObject(job, job.createdAt), status: 'queued', progress: 0 };
  sendMediaPlain(res, behaviour, () => sendJson(res, 200, created));
}

function notFound(res: ServerResponse, id: string): void {
  sendError(res, 404, `Video with id '${id}' not found.`, { param: 'video_id', code: 'not_found' });
}

/** Header controls only (reject_keys, hang, latency, status): polls are not new requests. */
async function pollFaults(req: IncomingMessage, res: ServerResponse, state: SimState, key: string | null): Promise<boolean> {
  return (await mediaFaults(req, res, state, { key, model: undefined, text: '' })) !== null;
}

/** GET and DELETE /v1/videos/{id}. */
export async function serveVideo(req: IncomingMessage, res: ServerResponse, state: SimState, id: string, key: string | null): Promise<void> {
  const job = state.videos.get(id);
  const method = req.method === 'DELETE' ? 'DELETE' : 'GET';
  state.stats.count(`${method} /v1/videos/{id}`, key, job?.model ?? null);
  if (!(await pollFaults(req, res, state, key))) return;
  if (!job) return notFound(res, id);
  const now = Date.now();
  if (method === 'DELETE') cancel(job, now);
  else job.polls += 1;
  sendJson(res, 200, videoObject(job, now));
}

type Range = { start: number; end: number } | 'whole' | 'unsatisfiable';

/** One `bytes=` range; several ranges or another unit: the whole body (RFC 9110 allows ignoring). */
export function parseRange(header: string | undefined, total: number): Range {
  if (header === undefined) return 'whole';
  const value = header.trim();
  if (!/^bytes=/i.test(value) || value.includes(',')) return 'whole';
  const m = /^bytes=\s*(\d*)\s*-\s*(\d*)$/i.exec(value);
  if (!m || (m[1] === '' && m[2] === '')) return 'unsatisfiable';
  if (m[1] === '') {
    const suffix = Number(m[2]);
    return suffix === 0 || total === 0 ? 'unsatisfiable' : { start: Math.max(0, total - suffix), end: total - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? total - 1 : Math.min(Number(m[2]), total - 1);
  return start >= total || (m[2] !== '' && Number(m[2]) < start) ? 'unsatisfiable' : { start, end };
}

async function sendBytes(req: IncomingMessage, res: ServerResponse, type: string, total: number, slice: (s: number, e: number) => Buffer): Promise<void> {
  const range = parseRange(typeof req.headers.range === 'string' ? req.headers.range : undefined, total);
  if (range === 'unsatisfiable') {
    return sendError(res, 416, `Range not satisfiable (content is ${total} bytes).`, { code: 'range_not_satisfiable', headers: { 'content-range': `bytes */${total}` } });
  }
  const { start, end } = range === 'whole' ? { start: 0, end: total - 1 } : range;
  res.writeHead(range === 'whole' ? 200 : 206, {
    'content-type': type,
    'content-length': end - start + 1,
    'accept-ranges': 'bytes',
    ...(range === 'whole' ? {} : { 'content-range': `bytes ${start}-${end}/${total}` }),
  });
  if (req.method === 'HEAD') return void res.end();
  for (let at = start; at <= end; at += SEND_CHUNK) {
    if (res.destroyed) return;
    if (!res.write(slice(at, Math.min(end + 1, at + SEND_CHUNK))) && !(await drained(res))) return;
  }
  res.end();
}

/** GET /v1/videos/{id}/content?variant=video|thumbnail|spritesheet (&index=0). */
export async function serveVideoContent(req: IncomingMessage, res: ServerResponse, state: SimState, id: string, query: URLSearchParams, key: string | null): Promise<void> {
  const job = state.videos.get(id);
  state.stats.count('GET /v1/videos/{id}/content', key, job?.model ?? null);
  if (!(await pollFaults(req, res, state, key))) return;
  if (!job) return notFound(res, id);
  const variant = query.get('variant') ?? 'video';
  if (!['video', 'thumbnail', 'spritesheet'].includes(variant)) {
    return sendError(res, 400, `Invalid value for 'variant': '${variant}'.`, { param: 'variant', code: 'invalid_value' });
  }
  const index = query.get('index');
  if (index !== null && index !== '0') return sendError(res, 404, `Video '${id}' has no content at index ${index}.`, { param: 'index', code: 'not_found' });
  const now = Date.now();
  const view = viewOf(job, now);
  if (view.status !== 'completed') {
    return sendError(res, 409, `Video '${id}' is ${view.status}; content is only available once it completed.`, { code: 'video_not_ready' });
  }
  if (view.contentExpiresAt !== null && now >= view.contentExpiresAt) {
    return sendError(res, 410, `The content of video '${id}' has expired.`, { code: 'content_expired' });
  }
  job.downloads += 1;
  if (variant === 'video') {
    return sendBytes(req, res, 'video/mp4', job.contentBytes, (s, e) => videoSlice(job.seed, job.contentBytes, s, e));
  }
  const format = variant === 'thumbnail' ? 'webp' : 'jpeg';
  const image = imageBytes(format, { r: job.seed & 0xff, g: (job.seed >>> 8) & 0xff, b: (job.seed >>> 16) & 0xff, a: 255 });
  return sendBytes(req, res, `image/${format}`, image.length, (s, e) => image.subarray(s, e));
}

/** GET /_sim/videos/{id} (one job's internal state), GET /_sim/videos (counts), DELETE /_sim/videos (forget all). */
export function serveSimVideos(req: IncomingMessage, res: ServerResponse, state: SimState, id: string | null): void {
  const now = Date.now();
  if (id !== null) {
    const job: VideoJob | undefined = state.videos.get(id);
    return job ? sendJson(res, 200, internalState(job, now)) : notFound(res, id);
  }
  if (req.method === 'DELETE') {
    state.videos.clear();
    return sendJson(res, 200, { jobs: 0, by_status: {} });
  }
  const byStatus: Record<string, number> = {};
  for (const job of state.videos.all()) {
    const status = viewOf(job, now).status;
    byStatus[status] = (byStatus[status] ?? 0) + 1;
  }
  sendJson(res, 200, { jobs: state.videos.size, by_status: byStatus });
}
