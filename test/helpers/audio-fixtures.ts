import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// Audio for the tests: real encoder output committed under test/fixtures/audio (see make.sh
// there), and a WAV writer for the cases a fixture cannot cover (long files, lying headers).

/** A committed fixture: tone.{wav,mp3,flac,m4a,aac,webm,opus.ogg,vorbis.ogg}, long-14s.mp3,
 *  and the recognised but refused tone.{aiff,flac.ogg,mp2,mka}. */
export const fixture = (name: string): Buffer => readFileSync(join(__dirname, '..', 'fixtures', 'audio', name));

/** PCM WAV, mono; `claimSeconds` lets the header lie about the data size. */
export function wav(seconds: number, opts: { rate?: number; bits?: 8 | 16; claimSeconds?: number } = {}): Buffer {
  const rate = opts.rate ?? 16_000;
  const bits = opts.bits ?? 16;
  const byteRate = (rate * bits) / 8;
  const data = Buffer.alloc(Math.round(seconds * byteRate), bits === 8 ? 0x80 : 0);
  const claimed = Math.round((opts.claimSeconds ?? seconds) * byteRate);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + claimed, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(byteRate, 28);
  h.writeUInt16LE(bits / 8, 32);
  h.writeUInt16LE(bits, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(claimed, 40);
  return Buffer.concat([h, data]);
}

export const png = (): Buffer => Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
