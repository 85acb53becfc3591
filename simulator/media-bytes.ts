// Real, small media bytes: solid-colour 8x8 PNG / baseline JPEG / lossless WebP images, PCM,
// WAV and MP3 audio, and an MP4-looking video blob. Everything is generated (no fixtures), is
// deterministic for its inputs, and decodes with standard decoders (libpng, libjpeg, libwebp).
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';

export type ImageFormat = 'png' | 'jpeg' | 'webp';
export interface Rgba {
  r: number;
  g: number;
  b: number;
  a: number;
}

const SIDE = 8;

/** A colour derived from any text (prompt, seed, image index). */
export function colourFor(text: string, transparent: boolean): Rgba {
  const h = createHash('sha256').update(text).digest();
  return { r: h[0] ?? 0, g: h[1] ?? 0, b: h[2] ?? 0, a: transparent ? 0 : 255 };
}

export function imageBytes(format: ImageFormat, c: Rgba): Buffer {
  if (format === 'png') return png(c);
  if (format === 'jpeg') return jpeg(c);
  return webp(c);
}

export const IMAGE_MEDIA_TYPES: Record<ImageFormat, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/** The format of image bytes by their magic numbers, or null. */
export function sniffImage(b: Buffer): ImageFormat | null {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return null;
}

// --- PNG ---------------------------------------------------------------------------------

const CRC_TABLE = ((): Uint32Array => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (let i = 0; i < buf.length; i++) c = (CRC_TABLE[(c ^ (buf[i] ?? 0)) & 0xff] ?? 0) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

function png(c: Rgba): Buffer {
  const alpha = c.a !== 255;
  const channels = alpha ? 4 : 3;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(SIDE, 0);
  ihdr.writeUInt32BE(SIDE, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = alpha ? 6 : 2; // RGBA : RGB
  const pixel = alpha ? [c.r, c.g, c.b, c.a] : [c.r, c.g, c.b];
  const raw = Buffer.alloc(SIDE * (1 + SIDE * channels));
  for (let y = 0; y < SIDE; y++) {
    const row = y * (1 + SIDE * channels); // filter byte 0, then the pixels
    for (let x = 0; x < SIDE; x++) raw.set(pixel, row + 1 + x * channels);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
}

// --- JPEG (baseline, 8x8, YCbCr 1x1; a solid block has only a DC coefficient) ---------------

const DC_BITS = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]; // the standard luminance DC table (Annex K)
const DC_CODES: Array<[code: number, length: number]> = [
  [0b00, 2], [0b010, 3], [0b011, 3], [0b100, 3], [0b101, 3], [0b110, 3],
  [0b1110, 4], [0b11110, 5], [0b111110, 6], [0b1111110, 7], [0b11111110, 8], [0b111111110, 9],
];

class BitWriter {
  private bytes: number[] = [];
  private acc = 0;
  private n = 0;
  write(value: number, length: number): void {
    for (let i = length - 1; i >= 0; i--) {
      this.acc = (this.acc << 1) | ((value >>> i) & 1);
      if (++this.n === 8) this.flushByte();
    }
  }
  private flushByte(): void {
    this.bytes.push(this.acc);
    if (this.acc === 0xff) this.bytes.push(0x00); // byte stuffing
    this.acc = 0;
    this.n = 0;
  }
  finish(): Buffer {
    while (this.n !== 0) this.write(1, 1); // pad with 1 bits
    return Buffer.from(this.bytes);
  }
}

function segment(marker: number, body: number[]): number[] {
  const len = body.length + 2;
  return [0xff, marker, len >> 8, len & 0xff, ...body];
}

function jpeg(c: Rgba): Buffer {
  const clamp = (v: number): number => Math.max(0, Math.min(255, Math.round(v)));
  const ycc = [
    clamp(0.299 * c.r + 0.587 * c.g + 0.114 * c.b),
    clamp(128 - 0.168736 * c.r - 0.331264 * c.g + 0.5 * c.b),
    clamp(128 + 0.5 * c.r - 0.418688 * c.g - 0.081312 * c.b),
  ];
  const bits = new BitWriter();
  for (const value of ycc) {
    const dc = 8 * (value - 128); // DCT of a flat block, quantiser 1
    const size = dc === 0 ? 0 : Math.floor(Math.log2(Math.abs(dc))) + 1;
    const [code, length] = DC_CODES[size] ?? [0, 2];
    bits.write(code, length);
    if (size > 0) bits.write(dc > 0 ? dc : dc + (1 << size) - 1, size);
    bits.write(0, 1); // AC: end of block, the only symbol of the AC table
  }
  const bytes = [
    0xff, 0xd8,
    ...segment(0xe0, [0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]), // JFIF 1.01
    ...segment(0xdb, [0, ...new Array<number>(64).fill(1)]),
    ...segment(0xc0, [8, 0, SIDE, 0, SIDE, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]),
    ...segment(0xc4, [0x00, ...DC_BITS, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
    ...segment(0xc4, [0x10, 1, ...new Array<number>(15).fill(0), 0x00]),
    ...segment(0xda, [3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0]),
  ];
  return Buffer.concat([Buffer.from(bytes), bits.finish(), Buffer.from([0xff, 0xd9])]);
}

// --- WebP (lossless VP8L; one-symbol prefix codes, so the pixels take no bits) --------------

class LsbWriter {
  private bytes: number[] = [];
  private acc = 0;
  private n = 0;
  write(value: number, length: number): void {
    for (let i = 0; i < length; i++) {
      this.acc |= ((value >>> i) & 1) << this.n;
      if (++this.n === 8) {
        this.bytes.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
  }
  finish(): Buffer {
    if (this.n > 0) this.bytes.push(this.acc);
    return Buffer.from(this.bytes);
  }
}

function webp(c: Rgba): Buffer {
  const w = new LsbWriter();
  w.write(0x2f, 8); // VP8L signature
  w.write(SIDE - 1, 14);
  w.write(SIDE - 1, 14);
  w.write(c.a !== 255 ? 1 : 0, 1); // alpha is used
  w.write(0, 3); // version
  w.write(0, 1); // no transform
  w.write(0, 1); // no colour cache
  w.write(0, 1); // no meta prefix codes
  for (const symbol of [c.g, c.r, c.b, c.a, 0]) {
    // simple code, one symbol, 8-bit symbol (the distance code: 1-bit symbol 0)
    w.write(1, 1);
    w.write(0, 1);
    const wide = symbol > 1 ? 1 : 0;
    w.write(wide, 1);
    w.write(symbol, wide ? 8 : 1);
  }
  const data = w.finish();
  const padded = data.length % 2 === 1 ? Buffer.concat([data, Buffer.alloc(1)]) : data;
  const head = Buffer.alloc(20);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(12 + padded.length, 4);
  head.write('WEBPVP8L', 8, 'latin1');
  head.writeUInt32LE(data.length, 16);
  return Buffer.concat([head, padded]);
}

// --- Audio ---------------------------------------------------------------------------------

export const PCM_RATE = 24_000;
const TONE_HZ = 440;
const AMPLITUDE = 8000;

/** `count` 16-bit LE mono samples of a 440 Hz tone, starting at sample `first` (phase-continuous). */
export function pcmSamples(first: number, count: number): Buffer {
  const out = Buffer.alloc(count * 2);
  for (let i = 0; i < count; i++) {
    out.writeInt16LE(Math.round(AMPLITUDE * Math.sin((2 * Math.PI * TONE_HZ * (first + i)) / PCM_RATE)), i * 2);
  }
  return out;
}

/**
 * One MPEG-2 Layer III frame: 24 kHz, 32 kbit/s, mono, 576 samples (24 ms), 96 bytes. Side
 * information and main data are zero, which every decoder plays as silence.
 */
export const MP3_FRAME = ((): Buffer => {
  const frame = Buffer.alloc(96);
  frame.set([0xff, 0xf3, 0x44, 0xc4]); // sync, MPEG-2, layer III, no CRC | 32 kbit/s, 24 kHz | mono, original
  return frame;
})();
const MP3_FRAME_SAMPLES = 576;
export const MP3_FRAME_SECONDS = MP3_FRAME_SAMPLES / PCM_RATE;

/** Bytes of base64 audio (a data URI too), or null when it is not base64. */
export function base64Bytes(data: string): number | null {
  const comma = data.startsWith('data:') ? data.indexOf(',') : -1;
  const payload = (comma === -1 ? data : data.slice(comma + 1)).replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(payload) || payload.length % 4 === 1) return null;
  return Buffer.byteLength(payload, 'base64');
}

/** A 44-byte WAV header for `dataBytes` of 16-bit mono PCM at 24 kHz. */
function wavHeader(dataBytes: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16); // fmt chunk size
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(PCM_RATE, 24);
  h.writeUInt32LE(PCM_RATE * 2, 28); // byte rate
  h.writeUInt16LE(2, 32); // block align
  h.writeUInt16LE(16, 34); // bits per sample
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Formats of a spoken chat answer: raw PCM (24 kHz 16-bit LE mono), WAV, MP3. */
export type SpokenFormat = 'pcm16' | 'wav' | 'mp3';
/** Each word of a spoken answer is 240 ms: 5,760 samples, exactly 10 MP3 frames. */
const WORD_SAMPLES = 5760;
export const WORD_SECONDS = WORD_SAMPLES / PCM_RATE;

/**
 * The audio of word `i` of a `words`-word spoken answer. The words in order make one valid file:
 * WAV's header comes with the first word, the tone stays phase-continuous.
 */
export function spokenWord(format: SpokenFormat, i: number, words: number): Buffer {
  if (format === 'mp3') return Buffer.concat(new Array<Buffer>(WORD_SAMPLES / MP3_FRAME_SAMPLES).fill(MP3_FRAME));
  const pcm = pcmSamples(i * WORD_SAMPLES, WORD_SAMPLES);
  return format === 'wav' && i === 0 ? Buffer.concat([wavHeader(words * WORD_SAMPLES * 2), pcm]) : pcm;
}

// --- Video -----------------------------------------------------------------------------------

/** An `ftyp` box (isom) and an `mdat` box header; the rest of the blob is deterministic filler. */
function mp4Head(total: number): Buffer {
  const head = Buffer.alloc(40);
  head.writeUInt32BE(32, 0);
  head.write('ftypisom', 4, 'latin1');
  head.writeUInt32BE(0x200, 12);
  head.write('isomiso2avc1mp41', 16, 'latin1');
  head.writeUInt32BE(total - 32, 32);
  head.write('mdat', 36, 'latin1');
  return head;
}
export const MP4_HEAD_BYTES = 40;

/** Bytes [start, end) of the `total`-byte video blob of `seed`; any slice matches the whole. */
export function videoSlice(seed: number, total: number, start: number, end: number): Buffer {
  const out = Buffer.alloc(end - start);
  const head = start < MP4_HEAD_BYTES ? mp4Head(total) : null;
  for (let p = start; p < end; p++) {
    if (head && p < MP4_HEAD_BYTES) {
      out[p - start] = head[p] ?? 0;
      continue;
    }
    let x = Math.imul(p ^ seed, 0x9e3779b1);
    x ^= x >>> 15;
    x = Math.imul(x, 0x85ebca6b);
    out[p - start] = (x >>> 24) & 0xff;
  }
  return out;
}
