// Fault/behaviour controls: parsing and merging. Pure functions, no I/O.
//
// Controls arrive from three places (later wins): server defaults (global, then per model),
// a `[sim k=v flag]` directive in the message text, and the `x-sim-behaviour` header.
// Invalid or unknown controls are reported, never ignored: a typo in a fault test should
// fail loudly instead of quietly testing the happy path.

export const INVALID = Symbol('invalid');
export type Invalid = typeof INVALID;
export type Parser<T> = (raw: unknown) => T | Invalid;
/** A set of controls: name → value parser. The completion endpoints use PARSERS; media ones a superset. */
export type ParserTable = Record<string, Parser<unknown>>;
export type Controls<T extends ParserTable> = { [K in keyof T]?: Exclude<ReturnType<T[K]>, Invalid> };

// Caps keep a hostile or mistyped value from exhausting memory or overflowing setTimeout.
export const MAX_MS = 3_600_000;
const MAX_TOKENS = 1_000_000;

export function int(min: number, max: number): Parser<number> {
  return (raw) => {
    const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
    return Number.isInteger(n) && n >= min && n <= max ? n : INVALID;
  };
}

// A bare flag (`[sim hang]`) arrives as `true`.
export const flag: Parser<boolean> = (raw) => {
  if (raw === true || raw === 'true' || raw === '1') return true;
  if (raw === false || raw === 'false' || raw === '0') return false;
  return INVALID;
};

export const text: Parser<string> = (raw) => (typeof raw === 'string' && raw.length > 0 ? raw : INVALID);

export const cost: Parser<number | 'auto'> = (raw) => {
  if (raw === 'auto') return 'auto';
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+(\.\d+)?([eE][-+]?\d+)?$/.test(raw) ? Number(raw) : NaN;
  return Number.isFinite(n) && n >= 0 ? n : INVALID;
};

// `k1|k2` in text form, or a JSON array of strings.
const keys: Parser<string[]> = (raw) => {
  const list = typeof raw === 'string' ? raw.split('|') : Array.isArray(raw) ? raw : null;
  if (!list || !list.every((k): k is string => typeof k === 'string')) return INVALID;
  const out = list.filter((k) => k.length > 0);
  return out.length > 0 ? out : INVALID;
};

export const PARSERS = {
  latency: int(0, MAX_MS),
  chunk_delay: int(0, MAX_MS),
  status: int(400, 599), // errors only; unset the control for a normal answer
  status_times: int(1, 1_000_000), // `status` for this many requests of the model, then normal answers
  retry_after: int(0, 86_400), // Retry-After seconds sent with `status` (429: 1 unless set)
  error_code: text,
  hang: flag,
  drop_after: int(0, MAX_TOKENS),
  no_usage: flag,
  cost,
  tokens: int(0, MAX_TOKENS),
  cached: int(0, MAX_TOKENS * 100),
  cache_write: int(0, MAX_TOKENS * 100),
  reasoning: int(0, MAX_TOKENS),
  reject_keys: keys,
  tool_call: text, // answer with a call to this (declared) tool
  tool_arg: text, // that call's argument name; its value is the text after the directive
};

export type ControlName = keyof typeof PARSERS;
export type Behaviour = Controls<typeof PARSERS>;
export type ParseResult = { ok: true; behaviour: Behaviour } | { ok: false; error: string };
export type ParseResultIn<T extends ParserTable> = { ok: true; behaviour: Controls<T> } | { ok: false; error: string };

export const CONTROL_NAMES = Object.keys(PARSERS) as ControlName[];

function isControlIn<T extends ParserTable>(table: T, name: string): name is Extract<keyof T, string> {
  return Object.prototype.hasOwnProperty.call(table, name);
}

function setControl<T extends ParserTable>(table: T, target: Controls<T>, name: Extract<keyof T, string>, raw: unknown): boolean {
  const parser = table[name];
  const value = parser ? parser(raw) : INVALID;
  if (value === INVALID) return false;
  (target as Record<string, unknown>)[name] = value;
  return true;
}

/** Parses `key=value` / bare-flag words against a control table; `source` only feeds the error message. */
export function parseWordsIn<T extends ParserTable>(table: T, words: readonly string[], source: string): ParseResultIn<T> {
  const behaviour: Controls<T> = {};
  for (const word of words) {
    if (word.length === 0) continue;
    const eq = word.indexOf('=');
    const name = eq === -1 ? word : word.slice(0, eq);
    const raw: unknown = eq === -1 ? true : word.slice(eq + 1);
    if (!isControlIn(table, name)) return { ok: false, error: `unknown simulator control '${name}' in ${source}` };
    if (!setControl(table, behaviour, name, raw)) {
      return { ok: false, error: `invalid value for simulator control '${name}' in ${source}` };
    }
  }
  return { ok: true, behaviour };
}

/** Parses `key=value` / bare-flag words; `source` only feeds the error message. */
export function parseWords(words: readonly string[], source: string): ParseResult {
  return parseWordsIn(PARSERS, words, source);
}

const DIRECTIVE = /\[sim(?:\s+([^\]]*))?\]/g;

/** Every `[sim ...]` directive in the text, later ones overriding earlier ones. */
export function parseDirectivesIn<T extends ParserTable>(table: T, content: string): ParseResultIn<T> {
  if (!content.includes('[sim')) return { ok: true, behaviour: {} };
  const words: string[] = [];
  for (const match of content.matchAll(DIRECTIVE)) {
    if (match[1]) words.push(...match[1].split(/\s+/));
  }
  return parseWordsIn(table, words, 'message directive');
}

export function parseDirectives(content: string): ParseResult {
  return parseDirectivesIn(PARSERS, content);
}

/** `x-sim-behaviour: key=value,key2=value2,flag` (spaces also separate). */
export function parseHeaderIn<T extends ParserTable>(table: T, value: string | undefined): ParseResultIn<T> {
  if (!value) return { ok: true, behaviour: {} };
  return parseWordsIn(table, value.split(/[\s,]+/), 'x-sim-behaviour header');
}

export function parseHeader(value: string | undefined): ParseResult {
  return parseHeaderIn(PARSERS, value);
}

export type DefaultsUpdate<T extends ParserTable> =
  | { ok: true; model: string | null; set: Controls<T>; unset: Extract<keyof T, string>[] }
  | { ok: false; error: string };

/** Body of `POST /_sim/behaviour`: `{ model?, ...controls }`; a control set to null is removed. */
export function parseDefaultsUpdate<T extends ParserTable>(body: unknown, table: T): DefaultsUpdate<T> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, error: 'body must be a JSON object' };
  }
  let model: string | null = null;
  const set: Controls<T> = {};
  const unset: Extract<keyof T, string>[] = [];
  for (const [name, raw] of Object.entries(body)) {
    if (name === 'model') {
      if (typeof raw !== 'string' || raw.length === 0) return { ok: false, error: "'model' must be a non-empty string" };
      model = raw;
    } else if (!isControlIn(table, name)) {
      return { ok: false, error: `unknown simulator control '${name}'` };
    } else if (raw === null) {
      unset.push(name);
    } else if (!setControl(table, set, name, raw)) {
      return { ok: false, error: `invalid value for simulator control '${name}'` };
    }
  }
  return { ok: true, model, set, unset };
}

export function applyUpdate<B extends object>(current: B, set: B, unset: readonly string[]): B {
  const next = { ...current, ...set } as Record<string, unknown>;
  for (const name of unset) delete next[name];
  return next as B;
}

export function mergeBehaviour<B extends object = Behaviour>(...layers: readonly B[]): B {
  return Object.assign({}, ...layers) as B;
}
