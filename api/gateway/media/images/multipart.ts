// A small streaming multipart/form-data reader: the body is consumed chunk by chunk, its size is
// counted as it arrives (a body over the limit is refused at the byte that crosses it, never
// buffered first), and parts, fields and header sizes are bounded.

export interface MultipartLimits {
  /** whole body, headers and boundaries included */
  maxBytes: number;
  maxParts: number;
  /** a text field's value */
  maxFieldBytes: number;
}

export interface Part {
  name: string;
  /** present when the part was sent as a file */
  filename: string | null;
  contentType: string | null;
  data: Buffer;
}

export class MultipartError extends Error {
  constructor(
    readonly kind: 'too_large' | 'malformed' | 'too_many_parts' | 'field_too_large',
    message: string,
  ) {
    super(message);
  }
}

const MAX_HEADER_BYTES = 8 * 1024;
const CRLF2 = Buffer.from('\r\n\r\n');

/** The boundary of a multipart/form-data content type, or null. */
export function boundaryOf(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2] ?? null) : null;
}

function parseHeaders(raw: string): { name: string; filename: string | null; contentType: string | null } {
  let disposition: string | null = null;
  let contentType: string | null = null;
  for (const line of raw.split('\r\n')) {
    const i = line.indexOf(':');
    if (i <= 0) throw new MultipartError('malformed', 'a part header line is malformed');
    const key = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    if (key === 'content-disposition') disposition = value;
    else if (key === 'content-type') contentType = value;
  }
  if (!disposition || !/^form-data\s*(;|$)/i.test(disposition)) throw new MultipartError('malformed', 'a part has no form-data Content-Disposition');
  const param = (p: string) => {
    const m = new RegExp(`;\\s*${p}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i').exec(disposition!);
    return m ? (m[1] ?? m[2] ?? '').replace(/\\(.)/g, '$1') : null;
  };
  const name = param('name');
  if (!name) throw new MultipartError('malformed', 'a part has no field name');
  return { name, filename: param('filename'), contentType };
}

/** Reads the whole form under the limits. */
export async function readMultipart(body: AsyncIterable<Buffer | string>, boundary: string, limits: MultipartLimits): Promise<Part[]> {
  const opening = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const parts: Part[] = [];
  let state = 'preamble' as 'preamble' | 'after-boundary' | 'headers' | 'body' | 'done';
  let buf: Buffer = Buffer.alloc(0);
  let total = 0;
  let current: { name: string; filename: string | null; contentType: string | null; chunks: Buffer[]; size: number } | null = null;

  const append = (data: Buffer) => {
    if (!current || data.length === 0) return;
    current.size += data.length;
    if (current.filename === null && current.size > limits.maxFieldBytes) throw new MultipartError('field_too_large', `field '${current.name}' is longer than ${limits.maxFieldBytes} bytes`);
    current.chunks.push(data);
  };

  const step = (): boolean => {
    if (state === 'preamble') {
      const i = buf.indexOf(opening);
      if (i < 0) {
        if (buf.length > MAX_HEADER_BYTES) throw new MultipartError('malformed', 'no opening boundary');
        return false;
      }
      buf = buf.subarray(i + opening.length);
      state = 'after-boundary';
      return true;
    }
    if (state === 'after-boundary') {
      if (buf.length < 2) return false;
      if (buf[0] === 0x2d && buf[1] === 0x2d) {
        state = 'done';
        return false;
      }
      // transport padding before the CRLF is allowed
      const i = buf.indexOf('\r\n');
      if (i < 0) {
        if (buf.length > 256) throw new MultipartError('malformed', 'a boundary line is malformed');
        return false;
      }
      if (buf.subarray(0, i).toString('latin1').trim() !== '') throw new MultipartError('malformed', 'a boundary line is malformed');
      buf = buf.subarray(i + 2);
      if (parts.length >= limits.maxParts) throw new MultipartError('too_many_parts', `more than ${limits.maxParts} parts`);
      state = 'headers';
      return true;
    }
    if (state === 'headers') {
      const i = buf.indexOf(CRLF2);
      if (i < 0) {
        if (buf.length > MAX_HEADER_BYTES) throw new MultipartError('malformed', 'part headers are too long');
        return false;
      }
      const h = parseHeaders(buf.subarray(0, i).toString('utf8'));
      current = { ...h, chunks: [], size: 0 };
      buf = buf.subarray(i + 4);
      state = 'body';
      return true;
    }
    if (state === 'body') {
      const i = buf.indexOf(delimiter);
      if (i < 0) {
        // keep a tail that may be the start of the delimiter
        const keep = Math.min(buf.length, delimiter.length - 1);
        append(buf.subarray(0, buf.length - keep));
        buf = Buffer.from(buf.subarray(buf.length - keep));
        return false;
      }
      append(buf.subarray(0, i));
      const c = current!;
      parts.push({ name: c.name, filename: c.filename, contentType: c.contentType, data: Buffer.concat(c.chunks, c.size) });
      current = null;
      buf = buf.subarray(i + delimiter.length);
      state = 'after-boundary';
      return true;
    }
    return false;
  };

  for await (const chunk of body) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    total += b.length;
    if (total > limits.maxBytes) throw new MultipartError('too_large', `the body is larger than ${limits.maxBytes} bytes`);
    if (state === 'done') continue; // epilogue: counted, ignored
    buf = buf.length ? Buffer.concat([buf, b]) : b;
    while (step());
  }
  if (state !== 'done') throw new MultipartError('malformed', 'the body ended before the closing boundary');
  return parts;
}
