// POST /v1/images/generations (JSON) and POST /v1/images/edits (multipart, or JSON): OpenAI's
// image wire format with real 8x8 PNG / JPEG / WebP bytes, `images_returned` (fewer images
// than asked), a reported `cost`, and streamed previews over server-sent events.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from './http';
import { colourFor, imageBytes, sniffImage, type ImageFormat } from './media-bytes';
import type { MediaBehaviour } from './media-behaviour';
import { invalid, isInvalid, mediaFaults, need, nowSeconds, read, readMedia, sendInvalid, sendMediaPlain, validate, type Invalid, type MediaInput } from './media-endpoint';
import { eventFrame, writeStream, type Frame } from './sse';
import type { SimState } from './state';

const MAX_PROMPT = 32_000;
const MAX_INPUT_IMAGES = 16;
const FORMATS = ['png', 'jpeg', 'webp'] as const;
const BACKGROUNDS = ['auto', 'transparent', 'opaque'] as const;
/** Output tokens per image by quality (OpenAI's square-image figures); other qualities count as medium. */
const OUTPUT_TOKENS: Record<string, number> = { low: 272, medium: 1056, high: 4160 };
const TOKENS_PER_INPUT_IMAGE = 85;
const AUTO_COST_PER_IMAGE = 0.01;

interface ImageRequest {
  model: string;
  prompt: string;
  n: number;
  size: string;
  quality: string;
  format: ImageFormat;
  background: 'transparent' | 'opaque';
  seed: number | undefined;
  stream: boolean;
  partialImages: number;
  inputImages: number;
}

type Parsed = ImageRequest | Invalid;

/** `auto`, `<W>x<H>`, or a tier (`512`, `1K`, `2K`, `4K`). */
const SIZE = /^(auto|\d{1,5}x\d{1,5}|512|[124]K)$/;

function parseCommon(body: Record<string, unknown>, inputImages: number): Parsed {
  return validate(() => {
    const model = need(read.str(body, 'model'));
    if (!model) return invalid("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
    const prompt = need(read.str(body, 'prompt'));
    if (!prompt) return invalid("Missing required parameter: 'prompt'.", 'prompt', 'missing_required_parameter');
    if (prompt.length > MAX_PROMPT) return invalid(`'prompt' is too long: at most ${MAX_PROMPT} characters.`, 'prompt', 'string_above_max_length');
    const n = need(read.int(body, 'n', 1, 10));
    const size = need(read.str(body, 'size'));
    const quality = need(read.str(body, 'quality'));
    const format = need(read.oneOf(body, 'output_format', FORMATS)) ?? 'png';
    const background = need(read.oneOf(body, 'background', BACKGROUNDS));
    need(read.int(body, 'output_compression', 0, 100));
    const seed = need(read.int(body, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
    const stream = need(read.bool(body, 'stream'));
    const partials = need(read.int(body, 'partial_images', 0, 3));
    need(read.int(body, 'steps', 1, 1000));
    need(read.num(body, 'guidance', 0, 100));
    for (const name of ['moderation', 'user', 'negative_prompt']) need(read.str(body, name));
    if (size !== undefined && !SIZE.test(size)) return invalid(`Invalid value for 'size': '${size}'.`, 'size', 'invalid_value');
    if (background === 'transparent' && format === 'jpeg') {
      return invalid("Transparent background requires 'output_format' png or webp.", 'background', 'invalid_value');
    }
    if (inputImages > MAX_INPUT_IMAGES) return invalid(`Too many input images: at most ${MAX_INPUT_IMAGES}.`, 'image', 'too_many_images');
    return {
      model,
      prompt,
      n: n ?? 1,
      size: size === undefined || size === 'auto' ? '1024x1024' : size,
      quality: quality === undefined || quality === 'auto' ? 'medium' : quality,
      format,
      background: background === 'transparent' ? 'transparent' : 'opaque',
      seed,
      stream: stream ?? false,
      partialImages: partials ?? 2,
      inputImages,
    } satisfies ImageRequest;
  });
}

/** JSON: `input_images` / `input_references` / `images` arrays (edits through JSON). */
function jsonInputImages(body: Record<string, unknown>): number | Invalid {
  let count = 0;
  for (const name of ['input_images', 'input_references', 'images']) {
    const v = body[name];
    if (v === undefined || v === null) continue;
    if (!Array.isArray(v)) return invalid(`Invalid type for '${name}': expected an array.`, name, 'invalid_type');
    count += v.length;
  }
  return count;
}

function parseEdit(input: MediaInput): Parsed {
  if (!input.multipart) {
    const count = jsonInputImages(input.body);
    if (isInvalid(count)) return count;
    if (count === 0) return invalid("Missing required parameter: 'images'.", 'images', 'missing_required_parameter');
    return parseCommon(input.body, count);
  }
  const images = input.files.filter((f) => f.field === 'image' || f.field === 'image[]');
  if (images.length === 0) return invalid("Missing required parameter: 'image'.", 'image', 'missing_required_parameter');
  for (const f of input.files) {
    if ((f.field === 'image' || f.field === 'image[]' || f.field === 'mask') && sniffImage(f.data) === null) {
      return invalid(`Invalid file '${f.field}': unsupported image format. Supported formats are PNG, JPEG and WebP.`, f.field, 'invalid_image_format');
    }
  }
  return parseCommon(input.body, images.length);
}

function usageFor(request: ImageRequest, images: number): Record<string, unknown> {
  const text = Math.ceil(request.prompt.length / 4);
  const image = request.inputImages * TOKENS_PER_INPUT_IMAGE;
  const output = images * (OUTPUT_TOKENS[request.quality] ?? OUTPUT_TOKENS.medium ?? 0);
  return {
    input_tokens: text + image,
    input_tokens_details: { text_tokens: text, image_tokens: image },
    output_tokens: output,
    total_tokens: text + image + output,
    ...(request.inputImages > 0 ? { input_images: request.inputImages } : {}),
  };
}

function costFor(behaviour: MediaBehaviour, images: number): number | undefined {
  const cost = behaviour.cost;
  if (cost === undefined || cost === 'none') return undefined;
  return cost === 'auto' ? Math.round(images * AUTO_COST_PER_IMAGE * 100) / 100 : cost;
}

function b64(request: ImageRequest, index: number, partial: number | null): string {
  const tag = `${request.prompt}\n${request.seed ?? ''}\n${index}${partial === null ? '' : `\npartial ${partial}`}`;
  return imageBytes(request.format, colourFor(tag, request.background === 'transparent')).toString('base64');
}

/** `image_generation.*` (edits: `image_edit.*`): previews of each image, then its completed event. */
function* imageFrames(request: ImageRequest, behaviour: MediaBehaviour, returned: number, prefix: string): Generator<Frame> {
  const common = { created_at: nowSeconds(), size: request.size, quality: request.quality, background: request.background, output_format: request.format };
  for (let i = 0; i < returned; i++) {
    for (let p = 0; p < request.partialImages; p++) {
      yield eventFrame(`${prefix}.partial_image`, { type: `${prefix}.partial_image`, b64_json: b64(request, i, p), ...common, partial_image_index: p, image_index: i });
    }
    // usage and cost are cumulative: the last completed event received covers every image received.
    const cost = costFor(behaviour, i + 1);
    const done = {
      type: `${prefix}.completed`,
      b64_json: b64(request, i, null),
      ...common,
      image_index: i,
      ...(behaviour.no_usage ? {} : { usage: usageFor(request, i + 1) }),
      ...(cost === undefined ? {} : { cost }),
    };
    yield eventFrame(`${prefix}.completed`, done, true);
  }
}

async function answer(res: ServerResponse, request: ImageRequest, behaviour: MediaBehaviour, prefix: string): Promise<void> {
  const returned = Math.min(request.n, behaviour.images_returned ?? request.n);
  if (request.stream) {
    await writeStream(res, imageFrames(request, behaviour, returned, prefix), {
      delay: behaviour.chunk_delay ?? 0,
      dropAfter: behaviour.drop_after,
      countedTotal: returned,
    });
    return;
  }
  const cost = costFor(behaviour, returned);
  sendMediaPlain(res, behaviour, () =>
    sendJson(res, 200, {
      created: nowSeconds(),
      background: request.background,
      data: Array.from({ length: returned }, (_, i) => ({ b64_json: b64(request, i, null) })),
      output_format: request.format,
      quality: request.quality,
      size: request.size,
      ...(behaviour.no_usage ? {} : { usage: usageFor(request, returned) }),
      ...(cost === undefined ? {} : { cost }),
    }),
  );
}

async function serve(req: IncomingMessage, res: ServerResponse, state: SimState, endpoint: string, edit: boolean): Promise<void> {
  const input = await readMedia(req, res, state, endpoint, edit);
  if (!input) return;
  let parsed: Parsed;
  if (edit) parsed = parseEdit(input);
  else {
    const count = jsonInputImages(input.body);
    parsed = isInvalid(count) ? count : parseCommon(input.body, count);
  }
  if (isInvalid(parsed)) return sendInvalid(res, parsed);
  const behaviour = await mediaFaults(req, res, state, { key: input.key, model: parsed.model, text: parsed.prompt });
  if (!behaviour) return;
  await answer(res, parsed, behaviour, edit ? 'image_edit' : 'image_generation');
}

export const serveImageGenerations = (req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> =>
  serve(req, res, state, '/v1/images/generations', false);

export const serveImageEdits = (req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> =>
  serve(req, res, state, '/v1/images/edits', true);
