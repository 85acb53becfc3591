// The request pipeline of the media endpoints (images, audio, video), the counterpart of
// endpoint.ts: read the body (JSON, or multipart where the endpoint takes it), record it in
// the stats, let the endpoint validate it, then resolve the controls and apply them in the
// same order as the completion endpoints (reject_keys, hang, latency, status).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DEFAULT_ERROR_CODES } from './endpoint';
import { bearerKey, pause, readBody, sendError } from './http';
import { mergeBehaviour } from './behaviour';
import { parseMediaDirectives, parseMediaHeader, type MediaBehaviour } from './media-behaviour';
import { multipartBoundary, parseMultipart, type FilePart } from './multipart';
import type { SimState } from './state';
import { isRecord } from './text';

/** Whole multipart bodies are limited to 30 MB (JSON bodies keep the shared 32 MB). */
export const MULTIPART_LIMIT = 30 * 1024 * 1024;
/** Strings longer than this are replaced by a note in the recorded stats body. */
const KEPT_STRING = 64 * 1024;

export interface MediaInput {
  /** The JSON body, or the multipart text fields (`x[]` fields as arrays, others the last value). */
  body: Record<string, unknown>;
  /** Uploaded files (multipart only). */
  files: FilePart[];
  multipart: boolean;
  key: string | null;
}

export type Invalid = { message: string; param: string | null; code?: string; status?: number };

export function invalid(message: string, param: string | null, code?: string): Invalid {
  return { message, param, code };
}

export function sendInvalid(res: ServerResponse, e: Invalid): void {
  sendError(res, e.status ?? 400, e.message, { param: e.param, code: e.code ?? null });
}

/** Stats copy of a body: long strings (base64 payloads) replaced by a note. */
function summarise(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length > KEPT_STRING ? `[sim: ${value.length} characters omitted]` : value;
  if (depth > 32 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => summarise(v, depth + 1));
  const out = Object.create(null) as Record<string, unknown>; // keeps a `__proto__` key a plain key
  for (const [k, v] of Object.entries(value)) out[k] = summarise(v, depth + 1);
  return out;
}

function formBody(fields: Map<string, string[]>, files: FilePart[]): { body: Record<string, unknown>; recorded: Record<string, unknown> } {
  // Null-prototype objects: a field named `__proto__` must stay a plain field.
  const body = Object.create(null) as Record<string, unknown>;
  for (const [name, values] of fields) body[name] = name.endsWith('[]') ? values : values[values.length - 1];
  const recorded = Object.assign(Object.create(null) as Record<string, unknown>, body);
  for (const f of files) {
    const existing = recorded[f.field];
    const list = Array.isArray(existing) ? (existing as unknown[]) : existing === undefined ? [] : [existing];
    list.push({ filename: f.filename, content_type: f.contentType, bytes: f.data.length });
    recorded[f.field] = list;
  }
  return { body, recorded };
}

/**
 * Reads and records the body. Resolves null when the request was already answered (413, bad
 * JSON, malformed multipart) or its connection closed mid-body.
 */
export async function readMedia(req: IncomingMessage, res: ServerResponse, state: SimState, endpoint: string, allowMultipart: boolean): Promise<MediaInput | null> {
  const key = bearerKey(req);
  const contentType = req.headers['content-type'];
  const boundary = allowMultipart ? multipartBoundary(contentType) : null;
  const unbounded = allowMultipart && boundary === null && /^\s*multipart\//i.test(contentType ?? '');
  const read = await readBody(req, boundary !== null ? MULTIPART_LIMIT : undefined).catch(() => null);
  if (read === null) return null;
  if (!read.ok) {
    const limit = boundary !== null ? '30 MB' : '32 MB';
    sendError(res, 413, `Request body exceeds ${limit}.`, { headers: { connection: 'close' } });
    return null;
  }
  const record = (body: unknown): void => {
    const b = isRecord(body) ? body : {};
    const stream = b.stream === true || b.stream === 'true';
    state.stats.record({ endpoint, model: typeof b.model === 'string' ? b.model : null, stream, include_usage: stream, key, body });
  };
  if (unbounded) {
    record(null);
    sendError(res, 400, "Invalid multipart body: the content type names no 'boundary' (multipart/form-data is expected).", { param: 'body', code: 'invalid_multipart' });
    return null;
  }
  if (boundary !== null) {
    const parsed = parseMultipart(read.body, boundary);
    if (!parsed.ok) {
      record(null);
      sendError(res, 400, `Invalid multipart body: ${parsed.error}.`, { param: 'body', code: parsed.error.startsWith('too many') ? 'too_many_parts' : 'invalid_multipart' });
      return null;
    }
    const { body, recorded } = formBody(parsed.form.fields, parsed.form.files);
    record(summarise(recorded));
    return { body, files: parsed.form.files, multipart: true, key };
  }
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    record(null);
    const hint = allowMultipart ? ' (or send multipart/form-data)' : '';
    sendError(res, 400, `We could not parse the JSON body of your request${hint}.`, { param: 'body' });
    return null;
  }
  record(summarise(body));
  if (!isRecord(body)) {
    sendError(res, 400, 'Request body must be a JSON object.', { param: 'body' });
    return null;
  }
  return { body, files: [], multipart: false, key };
}

/**
 * Server defaults < `[sim ...]` directive in the given text < request header. `model`
 * undefined: the header alone (calls that are not a new request, such as video polls).
 */
export function mediaBehaviour(req: IncomingMessage, state: SimState, model: string | null | undefined, text: string): MediaBehaviour | string {
  const directive = parseMediaDirectives(text);
  if (!directive.ok) return directive.error;
  const raw = req.headers['x-sim-behaviour'];
  const header = parseMediaHeader(Array.isArray(raw) ? raw.join(',') : raw);
  if (!header.ok) return header.error;
  const defaults = model === undefined ? {} : state.defaults.mediaForModel(model);
  return mergeBehaviour<MediaBehaviour>(defaults, directive.behaviour, header.behaviour);
}

/**
 * Resolves the controls and applies reject_keys, hang, latency and status. Resolves the
 * behaviour when the caller should answer, null when the request was answered, hangs, or
 * its connection closed.
 */
export async function mediaFaults(
  req: IncomingMessage,
  res: ServerResponse,
  state: SimState,
  input: { key: string | null; model: string | null | undefined; text: string },
): Promise<MediaBehaviour | null> {
  const behaviour = mediaBehaviour(req, state, input.model, input.text);
  if (typeof behaviour === 'string') {
    sendError(res, 400, behaviour, { code: 'invalid_sim_control' });
    return null;
  }
  if (input.key !== null && behaviour.reject_keys?.includes(input.key)) {
    sendError(res, 401, 'Incorrect API key provided.', { code: 'invalid_api_key' });
    return null;
  }
  if (behaviour.hang) return null; // keep the socket open; only the client or close() ends it
  if (!(await pause(behaviour.latency ?? 0, res))) {
    state.stats.closed(new URL(req.url ?? '/', 'http://sim').pathname);
    return null;
  }
  if (behaviour.status !== undefined) {
    const status = behaviour.status;
    sendError(res, status, `Simulated upstream error (status ${status}).`, {
      code: behaviour.error_code ?? DEFAULT_ERROR_CODES[status] ?? null,
      headers: status === 429 ? { 'retry-after': '1' } : {},
    });
    return null;
  }
  return behaviour;
}

/** Field readers shared by the media validators (JSON values, or multipart text). */
export const read = {
  str(body: Record<string, unknown>, name: string): string | undefined | Invalid {
    const v = body[name];
    if (v === undefined || v === null) return undefined;
    return typeof v === 'string' ? v : invalid(`Invalid type for '${name}': expected a string.`, name, 'invalid_type');
  },
  /** An integer in [min, max]; multipart sends numbers as text. */
  int(body: Record<string, unknown>, name: string, min: number, max: number): number | undefined | Invalid {
    const v = body[name];
    if (v === undefined || v === null) return undefined;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isInteger(n)) return invalid(`Invalid type for '${name}': expected an integer.`, name, 'invalid_type');
    if (n < min || n > max) return invalid(`Invalid '${name}': ${n} is out of range (${min} to ${max}).`, name, 'invalid_value');
    return n;
  },
  num(body: Record<string, unknown>, name: string, min: number, max: number): number | undefined | Invalid {
    const v = body[name];
    if (v === undefined || v === null) return undefined;
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
    if (!Number.isFinite(n)) return invalid(`Invalid type for '${name}': expected a number.`, name, 'invalid_type');
    if (n < min || n > max) return invalid(`Invalid '${name}': ${n} is out of range (${min} to ${max}).`, name, 'invalid_value');
    return n;
  },
  bool(body: Record<string, unknown>, name: string): boolean | undefined | Invalid {
    const v = body[name];
    if (v === undefined || v === null) return undefined;
    if (v === true || v === 'true') return true;
    if (v === false || v === 'false') return false;
    return invalid(`Invalid type for '${name}': expected a boolean.`, name, 'invalid_type');
  },
  oneOf<T extends string>(body: Record<string, unknown>, name: string, allowed: readonly T[]): T | undefined | Invalid {
    const v = read.str(body, name);
    if (v === undefined || isInvalid(v)) return v;
    return (allowed as readonly string[]).includes(v)
      ? (v as T)
      : invalid(`Invalid value for '${name}': '${v}'. Supported values are: ${allowed.map((a) => `'${a}'`).join(', ')}.`, name, 'invalid_value');
  },
};

export function isInvalid(v: unknown): v is Invalid {
  return isRecord(v) && typeof v.message === 'string' && 'param' in v;
}

class Rejected {
  constructor(readonly reason: Invalid) {}
}

/** Inside `validate`: the value, or abandon validation with this error. */
export function need<T>(v: T | Invalid): T {
  if (isInvalid(v)) throw new Rejected(v);
  return v;
}

/** Runs a validator written with `need`, turning the first error into its result. */
export function validate<T>(fn: () => T): T | Invalid {
  try {
    return fn();
  } catch (e) {
    if (e instanceof Rejected) return e.reason;
    throw e;
  }
}

/** Non-streaming answer: drop_after destroys the connection instead of answering. */
export function sendMediaPlain(res: ServerResponse, behaviour: MediaBehaviour, send: () => void): void {
  if (behaviour.drop_after !== undefined) {
    res.destroy();
    return;
  }
  send();
}

/** Unix seconds. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
