import type { ImageStreamEvent, UpstreamImageParams, UpstreamImages, UpstreamImageUsage } from '../endpoints';

// OpenAI's image wire format (POST v1/images/generations, v1/images/edits): the upstream body
// from a validated request, and the images, usage and cost read back (plain or streamed).

export const IMAGE_GENERATIONS_PATH = 'v1/images/generations';
/** Edits go as JSON with `images: [{ image_url }]` (data URLs): OpenAI's JSON form of edits. */
export const IMAGE_EDITS_PATH = 'v1/images/edits';

const PARTIAL_PREVIEWS = 2;
const RESERVED = new Set(['model', 'prompt', 'n', 'stream', 'partial_images', 'images', 'image', 'input_images', 'input_references', 'mask']);

export function imageRequestBody(upstreamModel: string, p: UpstreamImageParams, inputDataUrls: string[]): Record<string, unknown> {
  const { options, partial_images: partials, ...fields } = p;
  // Options never carry what the gateway decides or bills: the model, counts, input images.
  const extra = Object.fromEntries(Object.entries(options ?? {}).filter(([k]) => !RESERVED.has(k)));
  const body: Record<string, unknown> = { ...extra, model: upstreamModel };
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) body[k] = v;
  if (p.stream) body.partial_images = partials ?? PARTIAL_PREVIEWS;
  if (inputDataUrls.length) body.images = inputDataUrls.map((url) => ({ image_url: url }));
  return body;
}

function usageOf(u: unknown): UpstreamImageUsage | null {
  if (typeof u !== 'object' || u === null) return null;
  const { input_tokens: input, output_tokens: output } = u as Record<string, unknown>;
  return typeof input === 'number' && typeof output === 'number' ? { input, output } : null;
}
const costOf = (c: unknown): number | undefined => (typeof c === 'number' ? c : undefined);

export function parseImageResponse(json: Record<string, unknown>): UpstreamImages {
  const data = Array.isArray(json.data) ? json.data : [];
  const images = data.map((d) => (d as { b64_json?: unknown }).b64_json).filter((b): b is string => typeof b === 'string' && b.length > 0);
  return { images, usage: usageOf(json.usage), cost: costOf(json.cost) };
}

/** One upstream SSE event (`image_generation.*` or `image_edit.*`); usage and cost are cumulative. */
export function parseImageStreamEvent(data: string | null): ImageStreamEvent | null {
  if (!data || data === '[DONE]') return null;
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(data);
  } catch {
    return null;
  }
  const type = String(e.type ?? '');
  const b64 = typeof e.b64_json === 'string' ? e.b64_json : '';
  const imageIndex = typeof e.image_index === 'number' ? e.image_index : 0;
  if (type.endsWith('.partial_image') && b64) return { type: 'partial', b64, imageIndex, partialIndex: typeof e.partial_image_index === 'number' ? e.partial_image_index : 0 };
  if (type.endsWith('.completed') && b64) return { type: 'completed', b64, imageIndex, usage: usageOf(e.usage), cost: costOf(e.cost) };
  return null;
}

export function imageErrorMessage(json: unknown): string | null {
  const m = (json as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof m === 'string' ? m : null;
}
