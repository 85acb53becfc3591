import { GatewayError } from '../../../../domain/shared/errors';
import type { CatalogModel } from '../../../../domain/catalog/model';
import type { UpstreamImageParams } from '../../../../providers/endpoints';

// The parameters of spec 1 section 4.1 and their rules. Model-independent rules run first;
// `checkForModel` then applies the model's catalog entry (details.supported_parameters, limits).

export const MAX_PROMPT_CHARS = 32_000;
export const MAX_IMAGES = 10;
export const MAX_INPUT_IMAGES = 16;
const TIERS = ['512', '1K', '2K', '4K'] as const;
const QUALITIES = ['auto', 'low', 'medium', 'high', 'xhigh', 'max'] as const;
const FORMATS = ['png', 'jpeg', 'webp', 'svg'] as const;
const BACKGROUNDS = ['auto', 'transparent', 'opaque'] as const;

/** Always accepted; everything else must be in the model's supported_parameters. `stream` (and
 * `partial_images`, its previews) are always accepted because a model without streaming simply answers normally (spec 4.1). */
const ALWAYS = new Set(['model', 'prompt', 'stream', 'partial_images']);
/** Every parameter spec 4.1 knows; anything else is refused whatever the model. */
export const GENERATION_PARAMS = new Set([
  'model', 'prompt', 'n', 'size', 'width', 'height', 'resolution', 'aspect_ratio', 'quality', 'output_format',
  'output_compression', 'background', 'seed', 'input_references', 'stream', 'partial_images', 'response_format',
  'negative_prompt', 'guidance', 'steps', 'provider',
]);
/** OpenAI's range of previews a stream may carry. */
const MAX_PARTIAL_IMAGES = 3;

export interface ImageReference {
  /** the parameter path named in errors, e.g. input_references[0].image_url.url */
  param: string;
  url: string;
}

/** The fields the provider gets as they are (providers/endpoints.ts), and what the gateway reads itself. */
export interface ImageRequest extends Omit<UpstreamImageParams, 'options'> {
  model: string;
  /** `<W>x<H>` or a tier, as the client sent it (width/height folded in) */
  size?: string;
  resolution?: string;
  aspect_ratio?: string;
  providerOptions?: Record<string, unknown>;
  references: ImageReference[];
  /** the parameters the client sent, for the per-model check */
  sent: string[];
}

const bad = (param: string, detail: string) => new GatewayError('invalid_parameter', { param, detail });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function str(body: Record<string, unknown>, k: string): string | undefined {
  const v = body[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw bad(k, 'must be a string');
  return v;
}
function int(body: Record<string, unknown>, k: string, min: number, max: number): number | undefined {
  const v = body[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw bad(k, 'must be an integer');
  if (v < min || v > max) throw bad(k, `must be between ${min} and ${max}`);
  return v;
}
function oneOf<T extends string>(body: Record<string, unknown>, k: string, values: readonly T[]): T | undefined {
  const v = str(body, k);
  if (v !== undefined && !(values as readonly string[]).includes(v)) throw bad(k, `must be one of ${values.join(', ')}`);
  return v as T | undefined;
}

const PIXELS = /^([1-9]\d{1,4})x([1-9]\d{1,4})$/;

/** Model-independent rules of spec 4.1; unknown parameters are refused first. */
export function parseGeneration(body: Record<string, unknown>): ImageRequest {
  for (const k of Object.keys(body)) {
    if (!GENERATION_PARAMS.has(k)) throw new GatewayError('unsupported_parameter', { param: k, detail: 'not a parameter of image generation.' });
  }
  const model = str(body, 'model');
  if (!model) throw new GatewayError('missing_required_parameter', { param: 'model' });
  const prompt = str(body, 'prompt');
  if (!prompt) throw new GatewayError('missing_required_parameter', { param: 'prompt' });
  // characters, not UTF-16 units
  if (prompt.length > MAX_PROMPT_CHARS && [...prompt].length > MAX_PROMPT_CHARS) throw bad('prompt', `at most ${MAX_PROMPT_CHARS} characters`);
  const n = int(body, 'n', 1, MAX_IMAGES) ?? 1;

  let size = str(body, 'size');
  if (size !== undefined && !(TIERS as readonly string[]).includes(size)) {
    const m = PIXELS.exec(size);
    if (!m || Number(m[1]) > 16384 || Number(m[2]) > 16384) throw bad('size', "must be 512, 1K, 2K, 4K or '<W>x<H>' in pixels");
  }
  const width = int(body, 'width', 16, 16384);
  const height = int(body, 'height', 16, 16384);
  if (width !== undefined || height !== undefined) {
    if (size !== undefined) throw bad(width !== undefined ? 'width' : 'height', 'give size or width and height, not both');
    if (width === undefined) throw new GatewayError('missing_required_parameter', { param: 'width' });
    if (height === undefined) throw new GatewayError('missing_required_parameter', { param: 'height' });
    size = `${width}x${height}`;
  }
  const resolution = oneOf(body, 'resolution', TIERS);
  const aspect = str(body, 'aspect_ratio');
  if (aspect !== undefined && !/^[1-9]\d{0,2}:[1-9]\d{0,2}$/.test(aspect)) throw bad('aspect_ratio', "must be '<W>:<H>', e.g. 16:9");
  const quality = oneOf(body, 'quality', QUALITIES);
  const format = oneOf(body, 'output_format', FORMATS);
  const compression = int(body, 'output_compression', 0, 100);
  if (compression !== undefined && format !== 'jpeg' && format !== 'webp') throw bad('output_compression', "only with output_format 'jpeg' or 'webp'");
  const background = oneOf(body, 'background', BACKGROUNDS);
  if (background === 'transparent' && format !== undefined && format !== 'png' && format !== 'webp') throw bad('background', "'transparent' needs output_format 'png' or 'webp'");
  const seed = int(body, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  const stream = body.stream ?? false;
  if (typeof stream !== 'boolean') throw bad('stream', 'must be a boolean');
  const partials = int(body, 'partial_images', 0, MAX_PARTIAL_IMAGES);
  oneOf(body, 'response_format', ['b64_json'] as const);
  const negative = str(body, 'negative_prompt');
  if (negative !== undefined && negative.length > MAX_PROMPT_CHARS) throw bad('negative_prompt', `at most ${MAX_PROMPT_CHARS} characters`);
  const guidance = body.guidance;
  if (guidance !== undefined && (typeof guidance !== 'number' || !Number.isFinite(guidance) || guidance < 0 || guidance > 100)) throw bad('guidance', 'must be a number from 0 to 100');
  const steps = int(body, 'steps', 1, 1000);

  let providerOptions: Record<string, unknown> | undefined;
  if (body.provider !== undefined) {
    if (!isObject(body.provider)) throw bad('provider', 'must be an object');
    for (const k of Object.keys(body.provider)) if (k !== 'options') throw new GatewayError('unsupported_parameter', { param: `provider.${k}`, detail: 'only provider.options is accepted.' });
    const options = body.provider.options;
    if (options !== undefined && (!isObject(options) || !Object.values(options).every(isObject))) throw bad('provider.options', 'must be { <provider_slug>: { ... } }');
    providerOptions = options as Record<string, unknown> | undefined;
  }

  return {
    model,
    prompt,
    n,
    stream,
    partial_images: partials,
    size,
    resolution,
    aspect_ratio: aspect,
    quality,
    output_format: format,
    output_compression: compression,
    background,
    seed,
    negative_prompt: negative,
    guidance: guidance as number | undefined,
    steps,
    providerOptions,
    references: parseReferences(body.input_references),
    sent: Object.keys(body).filter((k) => body[k] !== undefined && body[k] !== null),
  };
}

function parseReferences(v: unknown): ImageReference[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw bad('input_references', 'must be an array');
  if (v.length === 0) throw bad('input_references', 'must not be empty');
  if (v.length > MAX_INPUT_IMAGES) throw bad('input_references', `at most ${MAX_INPUT_IMAGES} images`);
  return v.map((item, i) => {
    const param = `input_references[${i}]`;
    if (!isObject(item) || item.type !== 'image_url') throw bad(`${param}.type`, "must be 'image_url'");
    const img = item.image_url;
    const url = isObject(img) ? img.url : undefined;
    if (typeof url !== 'string' || !url) throw new GatewayError('missing_required_parameter', { param: `${param}.image_url.url` });
    if (!/^https?:\/\//i.test(url) && !/^data:[^,]*;base64,/i.test(url)) throw bad(`${param}.image_url.url`, 'must be a public http(s) URL or a base64 data URL');
    return { param: `${param}.image_url.url`, url };
  });
}

const list = (v: unknown): string[] | null => (Array.isArray(v) ? v.map(String) : null);

/** The model's own rules: its parameters, image limits, qualities and formats. */
export function checkForModel(req: ImageRequest, model: CatalogModel, inputImages: number, inputParam: string): void {
  const d = model.details ?? {};
  const supported = new Set(list(d.supported_parameters) ?? []);
  for (const p of req.sent) {
    if (ALWAYS.has(p) || supported.has(p)) continue;
    throw new GatewayError('unsupported_parameter', { param: p, detail: `model ${model.id} does not accept it.` });
  }
  const maxImages = Math.min(Number(d.max_images ?? 1), MAX_IMAGES);
  if (req.n > maxImages) throw bad('n', `at most ${maxImages} images for ${model.id}`);
  const maxInputs = Math.min(Number(d.max_input_images ?? 0), MAX_INPUT_IMAGES);
  if (inputImages > maxInputs) throw bad(inputParam, `at most ${maxInputs} input images for ${model.id}`);
  const qualities = list(d.qualities);
  if (req.quality !== undefined && qualities && !qualities.includes(req.quality)) throw bad('quality', `${model.id} supports ${qualities.join(', ')}`);
  const formats = list(d.output_formats);
  if (req.output_format !== undefined && formats && !formats.includes(req.output_format)) throw bad('output_format', `${model.id} supports ${formats.join(', ')}`);
}

/** The edit form's text fields (spec 4.2), typed as the JSON parameters. */
export const EDIT_TEXT_FIELDS = new Set([
  'model', 'prompt', 'n', 'size', 'resolution', 'aspect_ratio', 'quality', 'output_format', 'output_compression',
  'background', 'seed', 'stream', 'partial_images', 'response_format', 'negative_prompt', 'guidance', 'steps',
]);
const INT_FIELDS = new Set(['n', 'output_compression', 'seed', 'steps', 'partial_images']);

export function editFieldsToBody(fields: Map<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [k, v] of fields) {
    if (INT_FIELDS.has(k)) {
      if (!/^-?\d{1,16}$/.test(v.trim())) throw bad(k, 'must be an integer');
      body[k] = Number(v.trim());
    } else if (k === 'guidance') {
      const g = Number(v.trim());
      if (!v.trim() || !Number.isFinite(g)) throw bad(k, 'must be a number');
      body[k] = g;
    } else if (k === 'stream') {
      if (v !== 'true' && v !== 'false') throw bad(k, "must be 'true' or 'false'");
      body[k] = v === 'true';
    } else body[k] = v;
  }
  return body;
}
