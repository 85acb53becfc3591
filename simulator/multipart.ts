// A small multipart/form-data parser over an already read (size-limited) body. Pure function;
// every malformed input gives an error string, never an exception.

export interface FilePart {
  field: string;
  filename: string;
  contentType: string | null;
  data: Buffer;
}

export interface FormData {
  /** Text fields by name, in order (a repeated name keeps every value). */
  fields: Map<string, string[]>;
  files: FilePart[];
}

export type FormResult = { ok: true; form: FormData } | { ok: false; error: string };

/** Most fields and files one request may hold. */
export const MAX_PARTS = 20;
const MAX_HEADER_BYTES = 16 * 1024;

/** The boundary of a `multipart/form-data` content type, or null for any other type. */
export function multipartBoundary(contentType: string | undefined): string | null {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return match?.[1] ?? match?.[2] ?? null;
}

/** A `name="value"` parameter of a Content-Disposition header (quoted or bare). */
function dispositionParam(header: string, name: string): string | null {
  const match = new RegExp(`;\\s*${name}="((?:[^"\\\\]|\\\\.)*)"|;\\s*${name}=([^;\\s]+)`, 'i').exec(header);
  if (!match) return null;
  return match[1] !== undefined ? match[1].replace(/\\(.)/g, '$1') : (match[2] ?? null);
}

function parseHeaders(block: string): Map<string, string> {
  const headers = new Map<string, string>();
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

export function parseMultipart(body: Buffer, boundary: string): FormResult {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const fields = new Map<string, string[]>();
  const files: FilePart[] = [];
  let at = body.indexOf(delimiter);
  if (at === -1) return { ok: false, error: 'no multipart boundary found in the body' };
  let parts = 0;
  for (;;) {
    at += delimiter.length;
    if (body[at] === 0x2d && body[at + 1] === 0x2d) break; // `--boundary--`: the end
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) return { ok: false, error: 'malformed multipart boundary line' };
    at += 2;
    const headerEnd = body.indexOf('\r\n\r\n', at, 'latin1');
    if (headerEnd === -1 || headerEnd - at > MAX_HEADER_BYTES) return { ok: false, error: 'malformed multipart part headers' };
    const headers = parseHeaders(body.toString('utf8', at, headerEnd));
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n', 'latin1'), delimiter]), headerEnd + 4);
    if (next === -1) return { ok: false, error: 'multipart body ends without its closing boundary' };
    if (++parts > MAX_PARTS) return { ok: false, error: `too many multipart parts (at most ${MAX_PARTS})` };
    const disposition = headers.get('content-disposition') ?? '';
    const name = /^\s*form-data\s*(;|$)/i.test(disposition) ? dispositionParam(disposition, 'name') : null;
    if (name === null || name.length === 0) return { ok: false, error: 'a multipart part has no form-data name' };
    const data = body.subarray(headerEnd + 4, next);
    const filename = dispositionParam(disposition, 'filename');
    if (filename !== null) {
      files.push({ field: name, filename, contentType: headers.get('content-type') ?? null, data });
    } else {
      const list = fields.get(name) ?? [];
      list.push(data.toString('utf8'));
      fields.set(name, list);
    }
    at = next + 2;
  }
  return { ok: true, form: { fields, files } };
}
