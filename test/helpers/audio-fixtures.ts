// Tiny audio files of every format the transcription endpoint takes (and a few it refuses),
// built byte by byte from each format's specification: real headers and frames, silent content.

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

/** MPEG-2 Layer III frames, 24 kHz 32 kbit/s mono (96 bytes, 24 ms each), silent. */
export function mp3(frames = 50): Buffer {
  const frame = Buffer.alloc(96);
  Buffer.from([0xff, 0xf3, 0x44, 0xc4]).copy(frame);
  return Buffer.concat(new Array<Buffer>(frames).fill(frame));
}

/** `fLaC` + a last-block STREAMINFO (16 kHz mono 16-bit) + a frame header. */
export function flac(): Buffer {
  const info = Buffer.alloc(34);
  info.writeUInt16BE(4096, 0);
  info.writeUInt16BE(4096, 2);
  // 20 bits rate (16000), 3 bits channels-1 (0), 5 bits bps-1 (15), 36 bits samples (16000)
  info.writeUInt32BE((16_000 << 12) | (0 << 9) | (15 << 4), 10);
  info.writeUInt32BE(16_000, 14);
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), Buffer.from([0x80, 0, 0, 34]), info, Buffer.from([0xff, 0xf8, 0x69, 0x08, 0x00, 0x00])]);
}

function oggPage(packet: Buffer): Buffer {
  const h = Buffer.alloc(27);
  h.write('OggS', 0, 'latin1');
  h[5] = 0x02; // beginning of stream
  h.writeUInt32LE(0x5eed, 14);
  h[26] = 1;
  return Buffer.concat([h, Buffer.from([packet.length]), packet]);
}

export function oggOpus(): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48_000, 12);
  return oggPage(head);
}

export function oggVorbis(): Buffer {
  const ident = Buffer.alloc(30);
  ident.write('\x01vorbis', 0, 'latin1');
  ident[11] = 1;
  ident.writeUInt32LE(44_100, 12);
  return oggPage(ident);
}

export function oggFlac(): Buffer {
  return oggPage(Buffer.concat([Buffer.from('\x7fFLAC\x01\x00\x00\x01fLaC', 'latin1'), Buffer.alloc(38)]));
}

/** EBML header with DocType `webm`. */
export function webm(): Buffer {
  const doctype = Buffer.concat([Buffer.from([0x42, 0x82, 0x84]), Buffer.from('webm', 'latin1')]);
  return Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x80 | doctype.length]), doctype, Buffer.alloc(32)]);
}

/** An MP4 `ftyp` box of brand `M4A `. */
export function m4a(): Buffer {
  const ftyp = Buffer.alloc(24);
  ftyp.writeUInt32BE(24, 0);
  ftyp.write('ftypM4A ', 4, 'latin1');
  ftyp.write('M4A mp42', 16, 'latin1');
  return Buffer.concat([ftyp, Buffer.alloc(64)]);
}

/** ADTS AAC-LC frames, 16 kHz mono. */
export function aac(frames = 10): Buffer {
  const frame = Buffer.alloc(32);
  const len = frame.length;
  Buffer.from([0xff, 0xf1, 0x60, 0x40 | ((len >> 11) & 0x3), (len >> 3) & 0xff, ((len & 7) << 5) | 0x1f, 0xfc]).copy(frame);
  return Buffer.concat(new Array<Buffer>(frames).fill(frame));
}

export function aiff(): Buffer {
  const b = Buffer.alloc(54);
  b.write('FORM', 0, 'latin1');
  b.writeUInt32BE(46, 4);
  b.write('AIFFCOMM', 8, 'latin1');
  return b;
}

export const png = (): Buffer => Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
