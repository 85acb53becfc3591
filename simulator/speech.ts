// POST /v1/audio/speech: streams real audio bytes (PCM: 16-bit LE mono 24 kHz 440 Hz tone;
// MP3: silent MPEG-2 Layer III frames) chunk by chunk as they are "produced". The answer
// carries no cost; the cost of the audio actually sent is recorded for /v1/generations/{id}
// (with text and audio tokens for token-metered models).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { meteredInTokens } from './catalog';
import { usd, DEFAULT_COST_DELAY } from './generations';
import { drained, pause, sendError } from './http';
import { MP3_FRAME, MP3_FRAME_SECONDS, PCM_RATE, pcmSamples } from './media-bytes';
import type { MediaBehaviour } from './media-behaviour';
import { invalid, isInvalid, mediaFaults, need, read, readMedia, sendInvalid, validate, type Invalid } from './media-endpoint';
import type { SimState } from './state';

const MAX_INPUT = 10_000;
/** Audio per input character, and the longest answer. */
const SECONDS_PER_CHAR = 0.06;
const MAX_SECONDS = 120;
/** cost=auto: USD per input character ($15 per million). */
const AUTO_COST_PER_CHAR = 0.000015;
/** Token-metered models (as gpt-4o-mini-tts): an audio token per 50 ms; USD per text input and audio output token. */
const AUDIO_TOKENS_PER_SECOND = 20;
const AUTO_COST_PER_INPUT_TOKEN = 0.0000006;
const AUTO_COST_PER_OUTPUT_TOKEN = 0.000012;
/** One chunk: 100 ms of PCM (2,400 samples, 4,800 bytes) or 5 MP3 frames (120 ms, 480 bytes). */
const PCM_CHUNK_SAMPLES = 2400;
const MP3_CHUNK_FRAMES = 5;

interface SpeechRequest {
  model: string;
  input: string;
  format: 'mp3' | 'pcm';
}

function parse(body: Record<string, unknown>): SpeechRequest | Invalid {
  return validate(() => {
    const model = need(read.str(body, 'model'));
    if (!model) return invalid("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
    const input = need(read.str(body, 'input'));
    if (!input) return invalid("Missing required parameter: 'input'.", 'input', 'missing_required_parameter');
    if (input.length > MAX_INPUT) return invalid(`'input' is too long: at most ${MAX_INPUT} characters.`, 'input', 'string_above_max_length');
    need(read.str(body, 'voice'));
    need(read.num(body, 'speed', 0.25, 4));
    const format = need(read.oneOf(body, 'response_format', ['mp3', 'pcm'] as const)) ?? 'pcm';
    return { model, input, format };
  });
}

/** The audio as a list of chunk producers, and the seconds each holds. */
interface Audio {
  chunks: number;
  chunk(i: number): Buffer;
  secondsOf(i: number): number;
  seconds: number;
}

function audioFor(format: 'mp3' | 'pcm', seconds: number): Audio {
  if (format === 'pcm') {
    const samples = Math.round(seconds * PCM_RATE);
    const chunks = Math.ceil(samples / PCM_CHUNK_SAMPLES);
    const count = (i: number): number => Math.min(PCM_CHUNK_SAMPLES, samples - i * PCM_CHUNK_SAMPLES);
    return { chunks, chunk: (i) => pcmSamples(i * PCM_CHUNK_SAMPLES, count(i)), secondsOf: (i) => count(i) / PCM_RATE, seconds: samples / PCM_RATE };
  }
  const frames = Math.ceil(seconds / MP3_FRAME_SECONDS - 1e-9);
  const chunks = Math.ceil(frames / MP3_CHUNK_FRAMES);
  const count = (i: number): number => Math.min(MP3_CHUNK_FRAMES, frames - i * MP3_CHUNK_FRAMES);
  return {
    chunks,
    chunk: (i) => Buffer.concat(new Array<Buffer>(count(i)).fill(MP3_FRAME)),
    secondsOf: (i) => count(i) * MP3_FRAME_SECONDS,
    seconds: frames * MP3_FRAME_SECONDS,
  };
}

/** What was made: characters spoken and seconds sent, and for token-metered models the tokens. */
type Made = { characters: number; seconds: number } | { characters: number; seconds: number; input_tokens: number; output_tokens: number };

function recordedCost(behaviour: MediaBehaviour, made: Made, fraction: number): number | null {
  const cost = behaviour.cost;
  if (cost === 'none') return null;
  if (cost !== undefined && cost !== 'auto') return usd(cost * fraction);
  if ('input_tokens' in made) return usd(made.input_tokens * AUTO_COST_PER_INPUT_TOKEN + made.output_tokens * AUTO_COST_PER_OUTPUT_TOKEN);
  return usd(made.characters * AUTO_COST_PER_CHAR);
}

/** Streams the chunks; resolves the seconds of audio handed to the socket. */
async function stream(res: ServerResponse, audio: Audio, behaviour: MediaBehaviour): Promise<{ sent: number; complete: boolean }> {
  // drop_after=N: destroy after min(N, chunks) chunks; 0 counts as 1 (as SSE streams drop after the first frame).
  const dropAt = behaviour.drop_after === undefined ? -1 : Math.max(1, Math.min(behaviour.drop_after, audio.chunks));
  let sent = 0;
  if (behaviour.drop_after !== undefined && audio.chunks === 0) {
    res.destroy();
    return { sent, complete: false };
  }
  for (let i = 0; i < audio.chunks; i++) {
    // chunk_delay is the time each chunk takes to produce, the first one included.
    if (!(await pause(behaviour.chunk_delay ?? 0, res))) return { sent, complete: false };
    if (res.destroyed) return { sent, complete: false };
    const bytes = audio.chunk(i);
    sent += audio.secondsOf(i);
    if (i + 1 === dropAt) {
      res.write(bytes, () => res.destroy());
      return { sent, complete: false };
    }
    if (!res.write(bytes) && !(await drained(res))) return { sent, complete: false };
  }
  res.end();
  return { sent, complete: true };
}

export async function serveSpeech(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const input = await readMedia(req, res, state, '/v1/audio/speech', false);
  if (!input) return;
  const request = parse(input.body);
  if (isInvalid(request)) return sendInvalid(res, request);
  const behaviour = await mediaFaults(req, res, state, { key: input.key, model: request.model, text: request.input });
  if (!behaviour) return;
  if (behaviour.unsupported_format) {
    return sendError(res, 400, `The model does not support response_format '${request.format}'.`, { param: 'response_format', code: 'unsupported_format' });
  }
  const characters = request.input.length;
  const audio = audioFor(request.format, behaviour.seconds ?? Math.min(characters * SECONDS_PER_CHAR, MAX_SECONDS));
  const id = state.generations.start(behaviour.cost_delay ?? DEFAULT_COST_DELAY);
  res.writeHead(200, {
    'content-type': request.format === 'mp3' ? 'audio/mpeg' : 'audio/pcm',
    'cache-control': 'no-cache',
    'x-sim-generation-id': id,
  });
  res.flushHeaders();
  const { sent, complete } = await stream(res, audio, behaviour);
  const fraction = complete ? 1 : audio.seconds > 0 ? Math.min(1, sent / audio.seconds) : 0;
  const spoken = Math.round(characters * fraction);
  const made: Made = { characters: spoken, seconds: Math.round(sent * 1000) / 1000 };
  // Text tokens of what was spoken (4 characters a token), audio tokens of what was sent.
  const metered = meteredInTokens(request.model) ? { ...made, input_tokens: Math.ceil(spoken / 4), output_tokens: Math.round(sent * AUDIO_TOKENS_PER_SECOND) } : made;
  state.generations.finish(id, recordedCost(behaviour, metered, fraction), metered);
}
