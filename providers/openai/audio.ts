import type { SpeechParams, TranscriptionParams } from '../endpoints';
import type { FormPart } from '../upstream';

// OpenAI audio wire format: speech (`/v1/audio/speech`, raw bytes back) and transcription
// (`/v1/audio/transcriptions`). The provider's cost is recorded late, under the id of the
// `x-sim-generation-id` header, and read at `GET /v1/generations/{id}` (activities/provider-cost.ts).

export const SPEECH_PATH = 'v1/audio/speech';
export const TRANSCRIPTION_PATH = 'v1/audio/transcriptions';
export const GENERATION_ID_HEADER = 'x-sim-generation-id';

export function speechRequest(p: SpeechParams, upstreamModel: string): Record<string, unknown> {
  const { options, ...rest } = p;
  return { ...options, ...rest, model: upstreamModel };
}

export const SPEECH_CONTENT_TYPE = { mp3: 'audio/mpeg', pcm: 'audio/pcm;rate=24000;channels=1' } as const;

const MEDIA_TYPES: Record<string, string> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  flac: 'audio/flac',
  m4a: 'audio/mp4',
  ogg: 'audio/ogg',
  webm: 'audio/webm',
  aac: 'audio/aac',
};

/**
 * OpenAI's multipart form. The file is named and typed after the format read from its content,
 * so the provider never sees the client's (possibly wrong) name or label; the prompt is not sent.
 */
export function transcriptionRequest(p: TranscriptionParams, upstreamModel: string): FormPart[] {
  const parts: FormPart[] = [{ name: 'model', value: upstreamModel }];
  for (const [k, v] of Object.entries(p.options ?? {})) parts.push({ name: k, value: typeof v === 'string' ? v : JSON.stringify(v) });
  parts.push({ name: 'file', value: { data: p.audio, filename: `audio.${p.format}`, contentType: MEDIA_TYPES[p.format] ?? 'application/octet-stream' } });
  if (p.language) parts.push({ name: 'language', value: p.language });
  if (p.temperature !== undefined) parts.push({ name: 'temperature', value: String(p.temperature) });
  parts.push({ name: 'response_format', value: p.verbose ? 'verbose_json' : 'json' });
  for (const g of p.granularities ?? []) parts.push({ name: 'timestamp_granularities[]', value: g });
  return parts;
}

/**
 * The transcript fields to show, and the provider's measured usage without its `type`:
 * `duration` → `{ seconds }` (whisper-1), `tokens` → `{ input_tokens, input_token_details,
 * output_tokens, total_tokens }` (gpt-4o-transcribe).
 */
export function transcriptionResult(json: Record<string, unknown>): { body: Record<string, unknown>; usage: Record<string, unknown> | null } {
  const { usage, cost: _cost, ...body } = json;
  void _cost;
  if (!usage || typeof usage !== 'object') return { body, usage: null };
  const { type: _type, ...measured } = usage as Record<string, unknown>;
  void _type;
  return { body, usage: measured };
}
