import { GatewayError } from '../../../../domain/shared/errors';
import type { CatalogModel } from '../../../../domain/catalog/model';
import { decodeBase64 } from '../../media/audio/common';
import { inspectAudio, SIZE_BOUND_BYTES_PER_SECOND } from '../../media/audio/format';
import type { ChatRequest } from '../chat-schema';
import type { RequestAudio } from './types';

// Chat audio (spec 1 section 4.7): input_audio parts are checked and read for their duration
// before the hold, and audio output is checked against the model.

/**
 * Audio tokens a second of audio may cost at most, whatever the provider: Gemini counts 32 a
 * second, OpenAI's audio models about 10 of input and 20 of output. A clip is held for its
 * duration × this, never for its base64 size.
 */
const AUDIO_TOKENS_PER_SECOND_BOUND = 32;
/** A plausible count (OpenAI's input rate), for a stream cancelled before the provider's usage. */
const AUDIO_TOKENS_PER_SECOND_ESTIMATE = 10;
/** Bytes a second of the output formats, for that estimate: pcm16 and wav are 24 kHz 16-bit mono. */
const OUTPUT_BYTES_PER_SECOND: Record<string, number> = { pcm16: 48_000, wav: 48_000 };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Audio output (modalities with audio): the model's capability, stream: true, `audio`, its voice. */
function checkOutput(req: ChatRequest, model: CatalogModel): RequestAudio['output'] {
  if (!req.modalities?.includes('audio')) return null;
  if (!model.capabilities.includes('audio_output')) {
    throw new GatewayError('unsupported_capability', { model: req.model, endpoint: 'audio output', param: 'modalities', detail: 'choose a model with the audio_output capability.' });
  }
  if (req.stream !== true) throw new GatewayError('invalid_parameter', { param: 'stream', detail: 'audio output needs stream: true' });
  if (!req.audio) throw new GatewayError('missing_required_parameter', { param: 'audio' });
  // a custom voice (`{ id }`) is the provider's to check
  const voices = model.details.voices;
  if (Array.isArray(voices) && voices.length > 0 && typeof req.audio.voice === 'string' && !voices.includes(req.audio.voice)) {
    throw new GatewayError('invalid_parameter', { param: 'audio.voice', detail: `one of ${voices.join(', ')}` });
  }
  const bytesPerSecond = OUTPUT_BYTES_PER_SECOND[req.audio.format] ?? SIZE_BOUND_BYTES_PER_SECOND;
  return { tokensOf: (bytes) => Math.ceil((bytes / bytesPerSecond) * AUDIO_TOKENS_PER_SECOND_ESTIMATE) };
}

/** One input_audio part: checked, decoded and read; its duration in seconds (bound and as read). */
async function clipSeconds(part: Record<string, unknown>, param: string, role: string, model: CatalogModel): Promise<{ bound: number; read: number }> {
  if (role !== 'user') throw new GatewayError('invalid_parameter', { param, detail: 'input_audio parts are accepted in user messages only' });
  if (!model.capabilities.includes('audio_input')) {
    throw new GatewayError('unsupported_capability', { model: model.id, endpoint: 'audio input', param, detail: 'choose a model with the audio_input capability.' });
  }
  const audio = part.input_audio;
  if (audio === undefined) throw new GatewayError('missing_required_parameter', { param: `${param}.input_audio` });
  if (isObject(audio) && audio.data === undefined) throw new GatewayError('missing_required_parameter', { param: `${param}.input_audio.data` });
  if (!isObject(audio) || typeof audio.data !== 'string') throw new GatewayError('invalid_parameter', { param: `${param}.input_audio`, detail: '{ data: base64, format }' });
  if (typeof audio.format !== 'string') {
    if (audio.format === undefined) throw new GatewayError('missing_required_parameter', { param: `${param}.input_audio.format` });
    throw new GatewayError('invalid_parameter', { param: `${param}.input_audio.format`, detail: 'must be a string such as wav or mp3' });
  }
  const data = audio.data.trim();
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(data)) {
    throw new GatewayError('unsupported_parameter', { param: `${param}.input_audio.data`, detail: 'audio URLs are not supported; send the audio as base64' });
  }
  // decodeBase64 also takes data URIs; the chat wire format takes the bare payload only.
  const bytes = data.startsWith('data:') ? null : decodeBase64(data);
  if (!bytes || bytes.length === 0) throw new GatewayError('invalid_audio', { param: `${param}.input_audio.data`, detail: 'not valid base64 (the bare payload, no data: URI)' });
  const found = await inspectAudio(bytes);
  if (found.kind === 'unknown') throw new GatewayError('invalid_audio', { param: `${param}.input_audio.data`, detail: 'the content is not recognised audio' });
  if (found.kind === 'unsupported') throw new GatewayError('unsupported_audio_format', { format: found.format, param: `${param}.input_audio.data` });
  const sizeBound = bytes.length / SIZE_BOUND_BYTES_PER_SECOND;
  return { bound: Math.max(found.seconds ?? 0, sizeBound), read: found.seconds ?? sizeBound };
}

/** The chat dialect's checks that need the model, and the audio the hold is computed from. */
export async function inspectChatAudio(req: ChatRequest, model: CatalogModel): Promise<RequestAudio> {
  const output = checkOutput(req, model);
  let tokenBound = 0;
  let tokenEstimate = 0;
  let clips = 0;
  for (const [i, m] of req.messages.entries()) {
    if (!Array.isArray(m.content)) continue;
    for (const [j, part] of m.content.entries()) {
      if (part.type !== 'input_audio') continue;
      const s = await clipSeconds(part, `messages[${i}].content[${j}]`, m.role, model);
      clips++;
      tokenBound += Math.ceil(s.bound * AUDIO_TOKENS_PER_SECOND_BOUND);
      tokenEstimate += Math.ceil(s.read * AUDIO_TOKENS_PER_SECOND_ESTIMATE);
    }
  }
  return { input: clips > 0 ? { tokenBound, tokenEstimate } : null, output };
}
