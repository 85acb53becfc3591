// Audio format and duration, read from the content only (never a file name, MIME type or label).
//
// STOPGAP: hand-written magic-byte detection. `music-metadata` (format + duration of every
// container below, streaming-capable) is not in node_modules; once it is
// (`npm install music-metadata`), replace `detectAudio` with its `parseBuffer(bytes, undefined,
// { duration: true })` and keep `holdSeconds` as it is. Until then WAV durations come from the
// header and every other format is held by the size-based bound.

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

const ascii = (b: Buffer, at: number, len: number) => (b.length >= at + len ? b.toString('latin1', at, at + len) : '');

/** Which audio the bytes hold, by their magic numbers. */
export function detectAudio(b: Buffer): Detection {
  const head4 = ascii(b, 0, 4);
  if (head4 === 'RIFF' && ascii(b, 8, 4) === 'WAVE') return { kind: 'accepted', format: 'wav', seconds: wavSeconds(b) };
  if (head4 === 'FORM' && ['AIFF', 'AIFC'].includes(ascii(b, 8, 4))) return { kind: 'unsupported', format: 'aiff' };
  if (head4 === 'fLaC') return { kind: 'accepted', format: 'flac', seconds: null };
  if (head4 === 'OggS') return oggCodec(b);
  if (head4 === '\x1a\x45\xdf\xa3') return b.subarray(0, 64).includes('webm') ? { kind: 'accepted', format: 'webm', seconds: null } : { kind: 'unsupported', format: 'matroska' };
  if (ascii(b, 4, 4) === 'ftyp') return { kind: 'accepted', format: 'm4a', seconds: null };
  if (head4 === 'caff') return { kind: 'unsupported', format: 'caf' };
  if (head4 === '.snd') return { kind: 'unsupported', format: 'au' };
  if (ascii(b, 0, 5) === '#!AMR') return { kind: 'unsupported', format: 'amr' };
  if (ascii(b, 0, 3) === 'ID3') return { kind: 'accepted', format: 'mp3', seconds: null };
  if (b.length >= 4 && b[0] === 0xff) {
    const b1 = b[1] ?? 0;
    // ADTS (AAC): 12-bit sync, layer bits 00. MPEG audio layer III: 11-bit sync, layer bits 01.
    if ((b1 & 0xf6) === 0xf0) return { kind: 'accepted', format: 'aac', seconds: null };
    if ((b1 & 0xe0) === 0xe0 && (b1 & 0x06) === 0x02 && (b1 & 0x18) !== 0x08 && ((b[2] ?? 0) & 0xf0) !== 0xf0) return { kind: 'accepted', format: 'mp3', seconds: null };
  }
  return { kind: 'unknown' };
}

/** Ogg is accepted with Opus or Vorbis inside; the codec id sits in the first page's packet. */
function oggCodec(b: Buffer): Detection {
  const first = b.subarray(0, 128);
  if (first.includes('OpusHead') || first.includes('\x01vorbis')) return { kind: 'accepted', format: 'ogg', seconds: null };
  return { kind: 'unsupported', format: first.includes('FLAC') ? 'ogg/flac' : first.includes('Speex') ? 'ogg/speex' : 'ogg' };
}

/** Seconds of a RIFF WAVE file: the data chunk's size over the fmt chunk's byte rate. */
function wavSeconds(b: Buffer): number | null {
  let byteRate = 0;
  for (let at = 12; at + 8 <= b.length; ) {
    const id = ascii(b, at, 4);
    const size = b.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= b.length) byteRate = b.readUInt32LE(at + 16);
    // A streamed WAV may say 0 or 0xFFFFFFFF: then the bytes that follow are the data.
    if (id === 'data') return byteRate > 0 ? Math.min(size, b.length - at - 8) / byteRate : null;
    at += 8 + size + (size % 2);
  }
  return null;
}

/** Whole seconds to hold for: the content's duration, never under the size bound, at least 10 s. */
export function holdSeconds(d: Extract<Detection, { kind: 'accepted' }>, bytes: number): number {
  return Math.ceil(Math.max(MIN_HOLD_SECONDS, d.seconds ?? 0, bytes / SIZE_BOUND_BYTES_PER_SECOND) - 1e-9);
}
