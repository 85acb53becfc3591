// POST /v1/audio/transcriptions: multipart (`file`) or JSON (`input_audio`). The duration is
// derived from the audio's size (16,000 bytes a second) unless `seconds=N` sets it; the text
// is deterministic (2.5 words a second); usage in seconds, or tokens for token-metered models.
// The cost is recorded late, as for speech.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { meteredInTokens } from './catalog';
import { DEFAULT_COST_DELAY, usd } from './generations';
import { sendError, sendJson } from './http';
import { base64Bytes } from './media-bytes';
import type { MediaBehaviour } from './media-behaviour';
import { invalid, isInvalid, mediaFaults, need, read, readMedia, sendInvalid, sendMediaPlain, validate, type Invalid, type MediaInput } from './media-endpoint';
import type { SimState } from './state';
import { isRecord } from './text';

const BYTES_PER_SECOND = 16_000;
const WORDS_PER_SECOND = 2.5;
const MAX_WORDS = 2000;
const WORDS_PER_SEGMENT = 25;
const VOCABULARY = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'the', 'lazy', 'dog'];
/** cost=auto: USD per started second ($0.006 a minute). */
const AUTO_COST_PER_SECOND = 0.0001;
/**
 * Token-metered models (as gpt-4o-transcribe): an audio token per 100 ms, one token per word;
 * cost=auto: USD per audio input, text input (prompt) and text output token.
 */
const AUDIO_TOKENS_PER_SECOND = 10;
const AUTO_COST_PER_AUDIO_TOKEN = 0.000006;
const AUTO_COST_PER_TEXT_INPUT_TOKEN = 0.0000025;
const AUTO_COST_PER_OUTPUT_TOKEN = 0.00001;
const GRANULARITIES = ['word', 'segment'] as const;

interface TranscriptionRequest {
  model: string;
  bytes: number;
  language: string | undefined;
  temperature: number;
  verbose: boolean;
  granularities: string[];
  prompt: string;
}

function audioBytes(input: MediaInput): number | Invalid {
  if (input.multipart) {
    const file = input.files.find((f) => f.field === 'file');
    if (!file) return invalid("Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
    return file.data.length;
  }
  const audio = input.body.input_audio;
  if (!isRecord(audio) || typeof audio.data !== 'string') {
    return invalid("Missing required parameter: 'input_audio' ({ data, format }).", 'input_audio', 'missing_required_parameter');
  }
  const bytes = base64Bytes(audio.data);
  return bytes === null ? invalid("'input_audio.data' is not valid base64.", 'input_audio.data', 'invalid_audio') : bytes;
}

function granularities(body: Record<string, unknown>): string[] | Invalid {
  const raw = body['timestamp_granularities[]'] ?? body.timestamp_granularities;
  if (raw === undefined || raw === null) return [];
  const list = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(list) || !list.every((g) => (GRANULARITIES as readonly unknown[]).includes(g))) {
    return invalid("Invalid 'timestamp_granularities': items must be 'word' or 'segment'.", 'timestamp_granularities', 'invalid_value');
  }
  return list as string[];
}

function parse(input: MediaInput): TranscriptionRequest | Invalid {
  return validate(() => {
    const body = input.body;
    const model = need(read.str(body, 'model'));
    if (!model) return invalid("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
    const bytes = need(audioBytes(input));
    if (bytes === 0) return invalid('The audio file is empty.', input.multipart ? 'file' : 'input_audio', 'invalid_audio');
    const language = need(read.str(body, 'language'));
    const temperature = need(read.num(body, 'temperature', 0, 1)) ?? 0;
    const format = need(read.oneOf(body, 'response_format', ['json', 'verbose_json'] as const)) ?? 'json';
    const prompt = need(read.str(body, 'prompt')) ?? '';
    return { model, bytes, language, temperature, verbose: format === 'verbose_json', granularities: need(granularities(body)), prompt };
  });
}

const r2 = (x: number): number => Math.round(x * 100) / 100;

const wordCount = (duration: number): number => Math.min(MAX_WORDS, Math.floor(duration * WORDS_PER_SECOND));

function transcript(request: TranscriptionRequest, duration: number): Record<string, unknown> {
  const count = wordCount(duration);
  const words = Array.from({ length: count }, (_, i) => ({
    word: VOCABULARY[i % VOCABULARY.length] ?? 'the',
    start: r2((i * duration) / count),
    end: r2(((i + 1) * duration) / count),
  }));
  const text = words.map((w) => w.word).join(' ');
  if (!request.verbose) return { text };
  const segments = [];
  for (let s = 0; s * WORDS_PER_SEGMENT < count; s++) {
    const part = words.slice(s * WORDS_PER_SEGMENT, (s + 1) * WORDS_PER_SEGMENT);
    segments.push({
      id: s,
      seek: 0,
      start: part[0]?.start ?? 0,
      end: part[part.length - 1]?.end ?? 0,
      text: part.map((w) => w.word).join(' '),
      tokens: [],
      temperature: request.temperature,
      avg_logprob: -0.2,
      compression_ratio: 1.2,
      no_speech_prob: 0.01,
    });
  }
  const g = request.granularities;
  return {
    task: 'transcribe',
    language: request.language ?? 'english',
    duration: r2(duration),
    text,
    ...(g.length === 0 || g.includes('segment') ? { segments } : {}),
    ...(g.includes('word') ? { words } : {}),
  };
}

/** OpenAI's usage forms: `duration` (whisper-1) or `tokens` (gpt-4o-transcribe), with what auto costs. */
function metering(request: TranscriptionRequest, duration: number, seconds: number) {
  if (!meteredInTokens(request.model)) return { usage: { type: 'duration', seconds }, record: { seconds }, autoCost: seconds * AUTO_COST_PER_SECOND };
  const audio = Math.ceil(duration * AUDIO_TOKENS_PER_SECOND - 1e-9);
  const text = Math.ceil(request.prompt.length / 4);
  const output = wordCount(duration);
  const tokens = { input_tokens: audio + text, output_tokens: output, total_tokens: audio + text + output };
  return {
    usage: { type: 'tokens', ...tokens, input_token_details: { audio_tokens: audio, text_tokens: text } },
    record: tokens,
    autoCost: audio * AUTO_COST_PER_AUDIO_TOKEN + text * AUTO_COST_PER_TEXT_INPUT_TOKEN + output * AUTO_COST_PER_OUTPUT_TOKEN,
  };
}

function recordedCost(behaviour: MediaBehaviour, autoCost: number): number | null {
  const cost = behaviour.cost;
  if (cost === 'none') return null;
  return cost === undefined || cost === 'auto' ? usd(autoCost) : cost;
}

export async function serveTranscriptions(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const input = await readMedia(req, res, state, '/v1/audio/transcriptions', true);
  if (!input) return;
  const request = parse(input);
  if (isInvalid(request)) return sendInvalid(res, request);
  const behaviour = await mediaFaults(req, res, state, { key: input.key, model: request.model, text: request.prompt });
  if (!behaviour) return;
  if (behaviour.unsupported_format) {
    const supported = "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']";
    return sendError(res, 400, `Unsupported file format. Supported formats: ${supported}`, { param: input.multipart ? 'file' : 'input_audio', code: 'unsupported_format' });
  }
  const duration = behaviour.seconds ?? request.bytes / BYTES_PER_SECOND;
  const seconds = Math.max(0, Math.ceil(duration - 1e-9));
  const metered = metering(request, duration, seconds);
  sendMediaPlain(res, behaviour, () => {
    const id = state.generations.start(behaviour.cost_delay ?? DEFAULT_COST_DELAY);
    state.generations.finish(id, recordedCost(behaviour, metered.autoCost), metered.record);
    const usage = behaviour.no_usage ? {} : { usage: metered.usage };
    sendJson(res, 200, { ...transcript(request, duration), ...usage }, { 'x-sim-generation-id': id });
  });
}
