import Decimal from 'decimal.js';
import { jsonSchemaValidator } from './json-schema';
import type { Assertions, Dialect } from './runs';

// What a case's answer said (per dialect, plain or streamed), the assertions on it, and the
// network gate's host rules. Pure: no I/O.

export interface ToolCall {
  name: string;
  arguments: string;
}

export interface CaseOutput {
  text: string;
  toolCalls: ToolCall[];
}

export interface CaseAnswer extends CaseOutput {
  status: number;
  latencyMs: number;
  /** credits charged, exact decimal; null when unknown */
  cost: string | null;
  /** the error message of a non-2xx answer */
  errorMessage: string | null;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The text and tool calls of a non-streaming answer body. */
export function extractOutput(dialect: Dialect, body: unknown): CaseOutput {
  const b = obj(body);
  if (dialect === 'chat') {
    const m = obj(obj(arr(b.choices)[0]).message);
    const content = typeof m.content === 'string' ? m.content : arr(m.content).map((p) => str(obj(p).text)).join('');
    return {
      text: content,
      toolCalls: arr(m.tool_calls).map((t) => ({ name: str(obj(obj(t).function).name), arguments: str(obj(obj(t).function).arguments) })),
    };
  }
  if (dialect === 'messages') {
    const blocks = arr(b.content).map(obj);
    return {
      text: blocks.filter((x) => x.type === 'text').map((x) => str(x.text)).join(''),
      toolCalls: blocks.filter((x) => x.type === 'tool_use').map((x) => ({ name: str(x.name), arguments: JSON.stringify(x.input ?? {}) })),
    };
  }
  const items = arr(b.output).map(obj);
  return {
    text: items
      .filter((i) => i.type === 'message')
      .flatMap((i) => arr(i.content).map(obj))
      .filter((c) => c.type === 'output_text')
      .map((c) => str(c.text))
      .join(''),
    toolCalls: items.filter((i) => i.type === 'function_call').map((i) => ({ name: str(i.name), arguments: str(i.arguments) })),
  };
}

/** The data payloads of a server-sent event stream, parsed as JSON where they are JSON. */
export function sseEvents(text: string): Obj[] {
  const out: Obj[] = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (!data || data === '[DONE]') continue;
    try {
      out.push(obj(JSON.parse(data)));
    } catch {
      // not JSON: ignored
    }
  }
  return out;
}

/** The text and tool calls of a streamed answer, assembled from its events. */
export function extractStreamOutput(dialect: Dialect, text: string): CaseOutput {
  const events = sseEvents(text);
  if (dialect === 'chat') {
    let content = '';
    const calls = new Map<number, ToolCall>();
    for (const e of events) {
      const d = obj(obj(arr(e.choices)[0]).delta);
      content += str(d.content);
      for (const t of arr(d.tool_calls).map(obj)) {
        const i = typeof t.index === 'number' ? t.index : 0;
        const c = calls.get(i) ?? { name: '', arguments: '' };
        c.name += str(obj(t.function).name);
        c.arguments += str(obj(t.function).arguments);
        calls.set(i, c);
      }
    }
    return { text: content, toolCalls: [...calls.values()] };
  }
  if (dialect === 'messages') {
    let content = '';
    const calls: ToolCall[] = [];
    let current: ToolCall | null = null;
    for (const e of events) {
      if (e.type === 'content_block_start') {
        const block = obj(e.content_block);
        current = block.type === 'tool_use' ? { name: str(block.name), arguments: '' } : null;
        if (current) calls.push(current);
      } else if (e.type === 'content_block_delta') {
        const d = obj(e.delta);
        if (d.type === 'text_delta') content += str(d.text);
        if (d.type === 'input_json_delta' && current) current.arguments += str(d.partial_json);
      }
    }
    return { text: content, toolCalls: calls.map((c) => ({ ...c, arguments: c.arguments || '{}' })) };
  }
  const done = events.find((e) => e.type === 'response.completed' || e.type === 'response.incomplete');
  if (done) return extractOutput('responses', done.response);
  return { text: events.filter((e) => e.type === 'response.output_text.delta').map((e) => str(e.delta)).join(''), toolCalls: [] };
}

/** The message of an error body: the gateway's envelope, or Anthropic's shape. */
export function errorMessageOf(body: unknown): string | null {
  const e = obj(obj(body).error);
  const code = str(e.code) || str(e.type);
  const message = str(e.message);
  if (!message && !code) return null;
  return code ? `${code}: ${message}` : message;
}

const quote = (s: string, max = 80) => JSON.stringify(s.length > max ? s.slice(0, max) + '…' : s);

/** The JSON the json_schema assertion looks at: the text if it is JSON, else the first tool call's arguments. */
function outputJson(a: CaseAnswer): { ok: true; value: unknown } | { ok: false } {
  for (const candidate of [a.text.trim(), a.toolCalls[0]?.arguments]) {
    if (!candidate) continue;
    try {
      return { ok: true, value: JSON.parse(candidate) };
    } catch {
      // next
    }
  }
  return { ok: false };
}

/**
 * The reasons a case failed; empty when every assertion holds. A wrong status is reported alone:
 * the other assertions would only describe the error body.
 */
export function evaluateAssertions(as: Assertions, a: CaseAnswer): string[] {
  const statusOk = as.status !== undefined ? a.status === as.status : a.status >= 200 && a.status < 300;
  if (!statusOk) {
    return [`status: expected ${as.status ?? '2xx'}, got ${a.status}${a.errorMessage ? ` (${a.errorMessage})` : ''}`];
  }
  const reasons: string[] = [];
  for (const s of as.contains ?? []) if (!a.text.includes(s)) reasons.push(`contains: ${quote(s)} not found in the output ${quote(a.text)}`);
  for (const s of as.not_contains ?? []) if (a.text.includes(s)) reasons.push(`not_contains: ${quote(s)} found in the output`);
  for (const r of as.regex ?? []) if (!new RegExp(r).test(a.text)) reasons.push(`regex: /${r}/ does not match the output ${quote(a.text)}`);
  for (const t of as.tool_call ?? []) {
    if (!a.toolCalls.some((c) => c.name === t)) {
      reasons.push(`tool_call: no call to ${quote(t)} (calls: ${a.toolCalls.length ? a.toolCalls.map((c) => c.name).join(', ') : 'none'})`);
    }
  }
  if (as.json_schema) {
    const json = outputJson(a);
    if (!json.ok) reasons.push('json_schema: the output is not JSON (neither the text nor a tool call’s arguments)');
    else {
      const r = jsonSchemaValidator(as.json_schema).safeParse(json.value);
      if (!r.success) {
        const i = r.error.issues[0];
        reasons.push(`json_schema: at $${i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${i.message}`);
      }
    }
  }
  if (as.max_latency_ms !== undefined && a.latencyMs > as.max_latency_ms) reasons.push(`max_latency_ms: answered in ${a.latencyMs} ms, more than ${as.max_latency_ms} ms`);
  if (as.max_cost !== undefined) {
    if (a.cost === null) reasons.push(`max_cost: the cost of this answer is unknown (limit ${as.max_cost} credits)`);
    else if (new Decimal(a.cost).gt(as.max_cost)) reasons.push(`max_cost: cost ${a.cost} credits, more than ${as.max_cost}`);
  }
  return reasons;
}

// ---- network gate ----

export interface HostRule {
  host: string; // lower-case; `*.example.com` matches sub-domains
  port: string | null;
}

export function parseHostRule(rule: string): HostRule {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(rule.trim().toLowerCase());
  if (!m) throw new Error(`bad host rule ${rule}`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: m[2] ?? null };
}

/** host[:port] of a URL, with the scheme's default port made explicit. */
export function hostOf(url: URL): { host: string; port: string } {
  return { host: url.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port: url.port || (url.protocol === 'https:' ? '443' : '80') };
}

export function hostAllowed(rules: HostRule[], host: string, port: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return rules.some((r) => {
    if (r.port !== null && r.port !== String(port)) return false;
    if (r.host.startsWith('*.')) return h.endsWith(r.host.slice(1));
    return r.host === h;
  });
}

/** http(s) URLs the request would make someone fetch (image URLs): every `url` / `image_url` string. */
export function urlsInBody(body: unknown): URL[] {
  const out: URL[] = [];
  const walk = (v: unknown, key: string) => {
    if (typeof v === 'string') {
      if ((key === 'url' || key === 'image_url') && /^https?:\/\//i.test(v)) {
        try {
          out.push(new URL(v));
        } catch {
          // not a URL after all
        }
      }
    } else if (Array.isArray(v)) v.forEach((x) => walk(x, key));
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(body, '');
  return out;
}
