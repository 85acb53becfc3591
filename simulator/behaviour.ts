// Fault/behaviour controls: parsing and merging. Pure functions, no I/O.
//
// Controls arrive from three places (later wins): server defaults (global, then per model),
// a `[sim k=v flag]` directive in the message text, and the `x-sim-behaviour` header.
// Invalid or unknown controls are reported, never ignored: a typo in a fault test should
// fail loudly instead of quietly testing the happy path.

const INVALID = Symbol('invalid');
type Invalid = typeof INVALID;
type Parser<T> = (raw: unknown) => T | Invalid;

// Caps keep a hostile or mistyped value from exhausting memory or overflowing setTimeout.
const MAX_MS = 3_600_000;
const MAX_TOKENS = 1_000_000;

function int(min: number, max: number): Parser<number> {
  return (raw) => {
    const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
    return Number.isInteger(n) && n >= min && n <= max ? n : INVALID;
  };
}

// A bare flag (`[sim hang]`) arrives as `true`.
const flag: Parser<boolean> = (raw) => {
  if (raw === true || raw === 'true' || raw === '1') return true;
  if (raw === false || raw === 'false' || raw === '0') return false;
  return INVALID;
};

const text: Parser<string> = (raw) => (typeof raw === 'string' && raw.length > 0 ? raw : INVALID);

const cost: Parser<number | 'auto'> = (raw) => {
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

const PARSERS = {
  latency: int(0, MAX_MS),
  chunk_delay: int(0, MAX_MS),
  status: int(400, 599), // errors only; unset the control for a normal answer
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
};

export type ControlName = keyof typeof PARSERS;
export type Behaviour = { [K in ControlName]?: Exclude<ReturnType<(typeof PARSERS)[K]>, Invalid> };
export type ParseResult = { ok: true; behaviour: Behaviour } | { ok: false; error: string };

export const CONTROL_NAMES = Object.keys(PARSERS) as ControlName[];

function isControl(name: string): name is ControlName {
  return Object.prototype.hasOwnProperty.call(PARSERS, name);
}

function setControl<K extends ControlName>(target: Behaviour, name: K, raw: unknown): boolean {
  const value = PARSERS[name](raw);
  if (value === INVALID) return false;
  target[name] = value as Behaviour[K];
  return true;
}

/** Parses `key=value` / bare-flag words; `source` only feeds the error message. */
export function parseWords(words: readonly string[], source: string): ParseResult {
  const behaviour: Behaviour = {};
  for (const word of words) {
    if (word.length === 0) continue;
    const eq = word.indexOf('=');
    const name = eq === -1 ? word : word.slice(0, eq);
    const raw: unknown = eq === -1 ? true : word.slice(eq + 1);
    if (!isControl(name)) return { ok: false, error: `unknown simulator control '${name}' in ${source}` };
    if (!setControl(behaviour, name, raw)) {
      return { ok: false, error: `invalid value for simulator control '${name}' in ${source}` };
    }
  }
  return { ok: true, behaviour };
}

const DIRECTIVE = /\[sim(?:\s+([^\]]*))?\]/g;

/** Every `[sim ...]` directive in the text, later ones overriding earlier ones. */
export function parseDirectives(content: string): ParseResult {
  if (!content.includes('[sim')) return { ok: true, behaviour: {} };
  const words: string[] = [];
  for (const match of content.matchAll(DIRECTIVE)) {
    if (match[1]) words.push(...match[1].split(/\s+/));
  }
  return parseWords(words, 'message directive');
}

/** `x-sim-behaviour: key=value,key2=value2,flag` (spaces also separate). */
export function parseHeader(value: string | undefined): ParseResult {
  if (!value) return { ok: true, behaviour: {} };
  return parseWords(value.split(/[\s,]+/), 'x-sim-behaviour header');
}

export type DefaultsUpdate =
  | { ok: true; model: string | null; set: Behaviour; unset: ControlName[] }
  | { ok: false; error: string };

/** Body of `POST /_sim/behaviour`: `{ model?, ...controls }`; a control set to null is removed. */
export function parseDefaultsUpdate(body: unknown): DefaultsUpdate {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, error: 'body must be a JSON object' };
  }
  let model: string | null = null;
  const set: Behaviour = {};
  const unset: ControlName[] = [];
  for (const [name, raw] of Object.entries(body)) {
    if (name === 'model') {
      if (typeof raw !== 'string' || raw.length === 0) return { ok: false, error: "'model' must be a non-empty string" };
      model = raw;
    } else if (!isControl(name)) {
      return { ok: false, error: `unknown simulator control '${name}'` };
    } else if (raw === null) {
      unset.push(name);
    } else if (!setControl(set, name, raw)) {
      return { ok: false, error: `invalid value for simulator control '${name}'` };
    }
  }
  return { ok: true, model, set, unset };
}

export function applyUpdate(current: Behaviour, set: Behaviour, unset: readonly ControlName[]): Behaviour {
  const next: Behaviour = { ...current, ...set };
  for (const name of unset) delete next[name];
  return next;
}

export function mergeBehaviour(...layers: readonly Behaviour[]): Behaviour {
  return Object.assign({}, ...layers) as Behaviour;
}
