// Audio format and duration, read from the content only (never a file name, MIME type or label),
// by music-metadata: it knows every container below and reads durations from their headers, or
// by scanning frames where a header has none.

export type AcceptedFormat = 'wav' | 'mp3' | 'flac' | 'm4a' | 'ogg' | 'webm' | 'aac';

export type Detection =
  | { kind: 'accepted'; format: AcceptedFormat; /** seconds read from the content; null: not read */ seconds: number | null }
  | { kind: 'unsupported'; format: string }
  | { kind: 'unknown' };

/**
 * The fewest bytes a second of audio takes that we plan for (128 kbit/s, the provider's own
 * size-to-duration rule): a file is never held for less than bytes / this.
 */
export const SIZE_BOUND_BYTES_PER_SECOND = 16_000;
export const MIN_HOLD_SECONDS = 10;

// music-metadata is ESM-only; this CommonJS build loads it once, on first use.
type MusicMetadata = typeof import('music-metadata', { with: { 'resolution-mode': 'import' } });
let parser: Promise<MusicMetadata> | undefined;
const musicMetadata = () => (parser ??= import('music-metadata'));

/** What the transcription provider takes, by music-metadata's container and codec names. */
function accepted(container: string, codec: string): AcceptedFormat | null {
  if (container === 'WAVE') return 'wav';
  if (container === 'MPEG') return codec.endsWith('Layer 3') ? 'mp3' : null;
  if (container === 'FLAC') return 'flac';
  if (container.startsWith('M4A/')) return 'm4a';
  if (container === 'Ogg') return /^(opus|vorbis)/i.test(codec) ? 'ogg' : null;
  if (container === 'EBML/webm') return 'webm';
  if (container.startsWith('ADTS/')) return 'aac';
  return null;
}

/** Which audio the bytes hold and how long it plays. */
export async function inspectAudio(bytes: Buffer): Promise<Detection> {
  const mm = await musicMetadata();
  let format: { container?: string; codec?: string; duration?: number };
  try {
    ({ format } = await mm.parseBuffer(bytes, undefined, { duration: true, skipCovers: true }));
  } catch {
    // Unrecognised content, or a recognised header over a body too broken to read.
    return { kind: 'unknown' };
  }
  const container = format.container ?? '';
  const codec = format.codec ?? '';
  const found = accepted(container, codec);
  if (!found) return { kind: 'unsupported', format: [container, codec].filter(Boolean).join(' ').toLowerCase() || 'unknown' };
  const seconds = format.duration;
  return { kind: 'accepted', format: found, seconds: seconds !== undefined && Number.isFinite(seconds) && seconds >= 0 ? seconds : null };
}

/** Whole seconds to hold for: the content's duration, never under the size bound, at least 10 s. */
export function holdSeconds(d: Extract<Detection, { kind: 'accepted' }>, bytes: number): number {
  return Math.ceil(Math.max(MIN_HOLD_SECONDS, d.seconds ?? 0, bytes / SIZE_BOUND_BYTES_PER_SECOND) - 1e-9);
}
