import { Pool } from 'undici';

// The chaos run's clients: non-streaming requests on a fixed schedule (open loop) and streams
// back to back, against one gateway API, plus an optional mix of other asks (a `models` fallback
// list, a model whose route retries, the response cache's opt-in) each at its own rate. Every
// request is recorded with what its client saw: the status (0: the connection failed or broke),
// whether it was answered in full (a complete JSON body, or a stream up to [DONE]), the model that
// answered, whether from the response cache, and the charge shown.

/** What one request asks: `model` defaults to sim-gpt; `models` are its fallbacks. */
export interface Ask {
  content: string;
  stream: boolean;
  model?: string;
  models?: string[];
  /** more request headers, e.g. the response cache's opt-in */
  headers?: Record<string, string>;
  /** the mix entry it belongs to (for the report); absent: the plain load */
  kind?: string;
}

export interface Sent {
  api: string;
  stream: boolean;
  kind: string | null;
  /** the model asked for, and the one the answer names (a fallback's answer names the fallback) */
  asked: string;
  model: string | null;
  /** the non-streaming answer's usage (its charge is checked against the answering model's prices) */
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  /** the answer came from the response cache (x-gateway-cache: hit) */
  cacheHit: boolean;
  /** x-gateway-request-id (the reservation id), when the answer's head arrived */
  id: string | null;
  status: number;
  /** the whole answer arrived: a JSON body, or every event up to [DONE] */
  answered: boolean;
  /** the charge the answer showed: x-gateway-cost, or usage.cost of the stream's last event */
  cost: string | null;
  /** the error code of an error answer, or the transport error */
  error: string | null;
  startedAt: number;
  endedAt: number;
}

export interface Target {
  name: string;
  url: string;
  key: string;
  pool: Pool;
}

export function target(name: string, url: string, key: string): Target {
  return { name, url, key, pool: new Pool(url, { connections: 128, pipelining: 1, keepAliveTimeout: 10_000 }) };
}

const TIMEOUT_MS = 60_000;

/** One chat completion; never throws. */
export async function send(t: Target, ask: Ask): Promise<Sent> {
  const { content, stream } = ask;
  const model = ask.model ?? 'sim-gpt';
  const startedAt = Date.now();
  const out: Sent = { api: t.name, stream, kind: ask.kind ?? null, asked: model, model: null, usage: null, cacheHit: false, id: null, status: 0, answered: false, cost: null, error: null, startedAt, endedAt: 0 };
  try {
    const res = await t.pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json', ...ask.headers },
      body: JSON.stringify({ model, ...(ask.models ? { models: ask.models } : {}), max_tokens: 400, messages: [{ role: 'user', content }], ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) }),
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    });
    out.status = res.statusCode;
    const id = res.headers['x-gateway-request-id'];
    out.id = typeof id === 'string' ? id : null;
    out.cacheHit = res.headers['x-gateway-cache'] === 'hit';
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      try {
        out.error = JSON.parse(text).error?.code ?? null;
      } catch {
        out.error = text.slice(0, 80);
      }
    } else if (!stream) {
      const json = JSON.parse(text);
      const cost = res.headers['x-gateway-cost'];
      out.cost = typeof cost === 'string' ? cost : null;
      out.answered = Array.isArray(json.choices);
      out.model = json.model ?? null;
      out.usage = json.usage ? { prompt_tokens: json.usage.prompt_tokens, completion_tokens: json.usage.completion_tokens } : null;
    } else {
      let done = false;
      let failed = false;
      for (const line of text.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6).trim();
        if (data === '[DONE]') done = true;
        else {
          const ev = JSON.parse(data);
          if (ev.error) failed = true;
          if (ev.usage?.cost !== undefined) out.cost = String(ev.usage.cost);
          if (ev.model) out.model = ev.model;
        }
      }
      out.answered = done && !failed;
      if (!out.answered) out.error = failed ? 'error event' : 'stream cut short';
    }
  } catch (err) {
    out.error = (err as { code?: string }).code ?? String(err).slice(0, 80);
    if (out.status === 200) out.error = `body broke: ${out.error}`;
  }
  out.endedAt = Date.now();
  return out;
}

export interface LoadPlan {
  /** non-streaming requests per second (open loop) */
  rate: number;
  /** streams open at any time (each followed at once by the next) */
  streams: number;
  content: string;
  streamContent: string;
  /** more non-streaming requests, each entry at its own rate (ask() once per request, done() with what it got) */
  mix?: Array<{ rate: number; ask: () => Omit<Ask, 'stream'>; done?: (s: Sent) => void }>;
}

export interface Load {
  stop(): Promise<Sent[]>;
}

/** Starts a target's load; stop() stops issuing and resolves with every request once all ended. */
export function startLoad(t: Target, plan: LoadPlan, record: (s: Sent) => void): Load {
  let stopped = false;
  const pending = new Set<Promise<void>>();
  const sent: Sent[] = [];
  const track = (p: Promise<Sent>, done?: (s: Sent) => void) => {
    const q = p.then((s) => {
      sent.push(s);
      record(s);
      done?.(s);
      pending.delete(q);
    });
    pending.add(q);
  };
  const started = Date.now();
  const entries: NonNullable<LoadPlan['mix']> = [{ rate: plan.rate, ask: () => ({ content: plan.content }) }, ...(plan.mix ?? [])];
  const issued = entries.map(() => 0);
  const timer = setInterval(() => {
    entries.forEach((e, i) => {
      const due = Math.floor(((Date.now() - started) / 1000) * e.rate);
      while (!stopped && issued[i] < due) {
        issued[i]++;
        track(send(t, { ...e.ask(), stream: false }), e.done);
      }
    });
  }, 10);
  const streamers = Array.from({ length: plan.streams }, async () => {
    while (!stopped) {
      const s = send(t, { content: plan.streamContent, stream: true });
      track(s);
      const r = await s;
      if (r.status !== 200) await new Promise((res) => setTimeout(res, 200)); // refused or down: do not spin
    }
  });
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await Promise.all(streamers);
      while (pending.size) await Promise.all([...pending]);
      return sent;
    },
  };
}
