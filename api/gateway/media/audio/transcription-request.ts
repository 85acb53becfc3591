import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { GatewayError } from '../../../../domain/shared/errors';
import { readJsonObject } from '../../../shared/http';
import { decodeBase64, rejectUnknown } from './common';
import { inspectAudio, type AcceptedFormat } from './format';

// Reading and validating a transcription request (spec 4.5): multipart with `file`, or JSON with
// `input_audio`. Everything here happens before the hold and changes nothing.

const MAX_FILE = 25 * 1024 * 1024;
const MAX_JSON = 16 * 1024 * 1024;
/** Room for the multipart framing and text fields around the file. */
const MULTIPART_SLACK = 256 * 1024;
const MAX_PARTS = 20;
const FIELDS = ['model', 'language', 'temperature', 'response_format', 'timestamp_granularities', 'prompt', 'stream'];
const languages = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'code' });

export interface TranscriptionInput {
  model: string;
  audio: Buffer;
  format: AcceptedFormat;
  /** seconds read from the content; null when not read */
  seconds: number | null;
  language?: string;
  temperature?: number;
  verbose: boolean;
  granularities?: string[];
  providerOptions?: Record<string, Record<string, unknown>>;
  /** what makes two requests the same content (Idempotency-Key) */
  fields: Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export async function readTranscription(ctx: Context): Promise<TranscriptionInput> {
  const type = ctx.request.type;
  if (type === 'multipart/form-data') return fromMultipart(ctx);
  if (type === 'application/json' || !type) {
    const body = await readJsonObject(ctx, MAX_JSON);
    rejectUnknown(body, [...FIELDS, 'input_audio', 'provider']);
    const a = body.input_audio;
    if (a === undefined) throw new GatewayError('missing_required_parameter', { param: 'input_audio' });
    if (!isObject(a) || typeof a.data !== 'string') throw new GatewayError('invalid_parameter', { param: 'input_audio', detail: '{ data: base64 or data URI, format }' });
    const audio = decodeBase64(a.data);
    if (!audio) throw new GatewayError('invalid_audio', { param: 'input_audio.data', detail: 'not valid base64' });
    const { input_audio: _a, provider, ...fields } = body;
    void _a;
    return build(fields, audio, 'input_audio', providerOptionsOf(provider));
  }
  throw new GatewayError('unsupported_media_type', { detail: `Send multipart/form-data with a file, or application/json with input_audio; got ${type}.` });
}

async function fromMultipart(ctx: Context): Promise<TranscriptionInput> {
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { limit: MAX_FILE + MULTIPART_SLACK, length: ctx.get('content-length') || undefined });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw new GatewayError('request_too_large', { limit: '25 MB (transcription file)', param: 'file' });
    throw new GatewayError('invalid_request', { detail: 'the request body could not be read' });
  }
  // undici's (WHATWG) multipart parser: the one Node's fetch uses.
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { 'content-type': ctx.get('content-type') } }).formData();
  } catch {
    throw new GatewayError('invalid_multipart', { detail: 'the body is not valid multipart/form-data' });
  }
  const entries = [...form.entries()];
  if (entries.length > MAX_PARTS) throw new GatewayError('invalid_multipart', { detail: `at most ${MAX_PARTS} fields` });
  const fields: Record<string, unknown> = {};
  let file: Blob | null = null;
  for (const [name, value] of entries) {
    if (name === 'file') {
      if (typeof value === 'string') throw new GatewayError('invalid_multipart', { detail: "'file' must be a file part", param: 'file' });
      if (file) throw new GatewayError('invalid_multipart', { detail: "one 'file' only", param: 'file' });
      file = value;
      continue;
    }
    if (typeof value !== 'string') throw new GatewayError('invalid_multipart', { detail: `text field '${name}' holds a file`, param: name });
    if (name === 'timestamp_granularities[]' || name === 'timestamp_granularities') {
      fields.timestamp_granularities = [...((fields.timestamp_granularities as string[] | undefined) ?? []), value];
      continue;
    }
    if (!FIELDS.includes(name)) throw new GatewayError('unsupported_parameter', { param: name, detail: 'not accepted by this endpoint' });
    if (name in fields) throw new GatewayError('invalid_multipart', { detail: `field '${name}' is repeated`, param: name });
    fields[name] = value;
  }
  if (!file) throw new GatewayError('missing_required_parameter', { param: 'file' });
  if (file.size > MAX_FILE) throw new GatewayError('request_too_large', { limit: '25 MB (transcription file)', param: 'file' });
  // Multipart numbers and flags arrive as text.
  if (typeof fields.temperature === 'string') fields.temperature = fields.temperature.trim() === '' ? NaN : Number(fields.temperature);
  if (fields.stream === 'false') delete fields.stream;
  return build(fields, Buffer.from(await file.arrayBuffer()), 'file', undefined);
}

function providerOptionsOf(provider: unknown): Record<string, Record<string, unknown>> | undefined {
  if (provider === undefined) return undefined;
  if (!isObject(provider) || Object.keys(provider).some((k) => k !== 'options') || !isObject(provider.options) || !Object.values(provider.options).every(isObject)) {
    throw new GatewayError('invalid_parameter', { param: 'provider', detail: '{ options: { <provider_slug>: { … } } }' });
  }
  return provider.options as Record<string, Record<string, unknown>>;
}

async function build(fields: Record<string, unknown>, audio: Buffer, audioParam: string, providerOptions: TranscriptionInput['providerOptions']): Promise<TranscriptionInput> {
  const { model, language, temperature, response_format: format, timestamp_granularities: granularities, prompt, stream } = fields;
  if (model === undefined || model === '') throw new GatewayError('missing_required_parameter', { param: 'model' });
  if (typeof model !== 'string') throw new GatewayError('invalid_parameter', { param: 'model', detail: 'must be a string' });
  if (stream !== undefined && stream !== false) throw new GatewayError('unsupported_parameter', { param: 'stream', detail: 'transcriptions are not streamed' });
  if (language !== undefined && (typeof language !== 'string' || !/^[a-z]{2}$/.test(language) || languages.of(language) === language)) {
    throw new GatewayError('invalid_parameter', { param: 'language', detail: 'an ISO-639-1 code such as en' });
  }
  if (temperature !== undefined && (typeof temperature !== 'number' || !(temperature >= 0 && temperature <= 1))) {
    throw new GatewayError('invalid_parameter', { param: 'temperature', detail: 'a number from 0 to 1' });
  }
  if (format !== undefined && ['text', 'srt', 'vtt'].includes(format as string)) {
    throw new GatewayError('unsupported_parameter', { param: 'response_format', detail: `'${String(format)}' is not offered; use json or verbose_json` });
  }
  if (format !== undefined && format !== 'json' && format !== 'verbose_json') throw new GatewayError('invalid_parameter', { param: 'response_format', detail: 'json or verbose_json' });
  if (granularities !== undefined) {
    if (!Array.isArray(granularities) || granularities.length === 0 || !granularities.every((g) => g === 'word' || g === 'segment')) {
      throw new GatewayError('invalid_parameter', { param: 'timestamp_granularities', detail: "'word' and/or 'segment'" });
    }
    if (format !== 'verbose_json') throw new GatewayError('invalid_parameter', { param: 'timestamp_granularities', detail: 'only with response_format verbose_json' });
  }
  if (prompt !== undefined && typeof prompt !== 'string') throw new GatewayError('invalid_parameter', { param: 'prompt', detail: 'must be a string' });
  if (audio.length === 0) throw new GatewayError('invalid_audio', { param: audioParam, detail: 'the audio is empty' });
  const found = await inspectAudio(audio);
  if (found.kind === 'unknown') throw new GatewayError('invalid_audio', { param: audioParam, detail: 'the content is not recognised audio' });
  if (found.kind === 'unsupported') throw new GatewayError('unsupported_audio_format', { format: found.format, param: audioParam });
  return {
    model,
    audio,
    format: found.format,
    seconds: found.seconds,
    language: language as string | undefined,
    temperature: temperature as number | undefined,
    verbose: format === 'verbose_json',
    granularities: granularities as string[] | undefined,
    providerOptions,
    fields: { ...fields, provider: providerOptions },
  };
}
