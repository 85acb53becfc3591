// Controls of the media endpoints (images, audio, video): every completion control plus the
// media ones. Defaults (`/_sim/behaviour`) are validated against this superset, so one
// defaults store serves both; the completion endpoints only ever see their own controls.
import {
  cost,
  flag,
  int,
  INVALID,
  parseDirectivesIn,
  parseHeaderIn,
  PARSERS,
  type Behaviour,
  type Controls,
  type ParseResultIn,
  type Parser,
} from './behaviour';

const DAY_MS = 86_400_000;
/** Largest video body the simulator will produce (content_bytes). */
export const MAX_CONTENT_BYTES = 256 * 1024 * 1024;

/** A USD amount, `auto` (the endpoint's own rate), or `none` (the provider reports no cost). */
const mediaCost: Parser<number | 'auto' | 'none'> = (raw) => (raw === 'none' ? 'none' : cost(raw));

/** A non-negative number of seconds, decimals allowed (at most a day). */
const seconds: Parser<number> = (raw) => {
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : NaN;
  return Number.isFinite(n) && n >= 0 && n <= 86_400 ? n : INVALID;
};

const OUTCOMES = ['completed', 'failed', 'cancelled', 'expired'] as const;
export type VideoOutcome = (typeof OUTCOMES)[number];
const outcome: Parser<VideoOutcome> = (raw) => (OUTCOMES as readonly unknown[]).includes(raw) ? (raw as VideoOutcome) : INVALID;

export const MEDIA_PARSERS = {
  ...PARSERS,
  cost: mediaCost,
  images_returned: int(0, 10), // images: return fewer than `n`
  cost_delay: int(0, DAY_MS), // audio, video: ms until the recorded cost is visible
  seconds, // audio: duration of the speech / transcribed audio
  unsupported_format: flag, // audio: 400 as a provider refusing the format
  render_ms: int(0, DAY_MS), // video: creation → final state
  outcome, // video: final state
  content_ttl_ms: int(0, DAY_MS), // video: content answers 410 this long after completion
  content_bytes: int(64, MAX_CONTENT_BYTES), // video: size of the content
};

export type MediaControlName = keyof typeof MEDIA_PARSERS;
export type MediaBehaviour = Controls<typeof MEDIA_PARSERS>;

export const parseMediaDirectives = (content: string): ParseResultIn<typeof MEDIA_PARSERS> => parseDirectivesIn(MEDIA_PARSERS, content);
export const parseMediaHeader = (value: string | undefined): ParseResultIn<typeof MEDIA_PARSERS> => parseHeaderIn(MEDIA_PARSERS, value);

/** What the completion endpoints see of media defaults: their own controls only, `cost=none` as no cost. */
export function completionView(media: MediaBehaviour): Behaviour {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(PARSERS)) {
    const value = (media as Record<string, unknown>)[name];
    if (value !== undefined && !(name === 'cost' && value === 'none')) out[name] = value;
  }
  return out as Behaviour;
}
