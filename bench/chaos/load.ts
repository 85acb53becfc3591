import { Pool } from 'undici';

// The chaos run's clients: non-streaming requests on a fixed schedule (open loop) and streams
// back to back, against one gateway API. Every request is recorded with what its client saw:
// the status (0: the connection failed or broke), whether it was answered in full (a complete
// JSON body, or a stream up to [DONE]), and the charge the answer showed.

export interface Sent {
  api: string;
  stream: boolean;
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

/** One chat completion (`headers`: e.g. the response cache's opt-in); never throws. */
export async function send(t: Target, content: string, stream: boolean, headers: Record<string, string> = {}): Promise<Sent> {
  const startedAt = Date.now();
  const out: Sent = { api: t.name, stream, id: null, status: 0, answered: false, cost: null, error: null, startedAt, endedAt: 0 };
  try {
    const res = await t.pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'sim-gpt', max_tokens: 400, messages: [{ role: 'user', content }], ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}) }),
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    });
    out.status = res.statusCode;
    const id = res.headers['x-gateway-request-id'];
    out.id = typeof id === 'string' ? id : null;
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
  /** every n-th non-streaming request opts in to the response cache with the same content: hits in the mix */
  cachedEvery?: number;
}

export interface Load {
  stop(): Promise<Sent[]>;
}

/** Starts a target's load; stop() stops issuing and resolves with every request once all ended. */
export function startLoad(t: Target, plan: LoadPlan, record: (s: Sent) => void): Load {
  let stopped = false;
  const pending = new Set<Promise<void>>();
  const sent: Sent[] = [];
  const track = (p: Promise<Sent>) => {
    const q = p.then((s) => {
      sent.push(s);
      record(s);
      pending.delete(q);
    });
    pending.add(q);
  };
  const started = Date.now();
  let issued = 0;
  const timer = setInterval(() => {
    const due = Math.floor(((Date.now() - started) / 1000) * plan.rate);
    while (!stopped && issued < due) {
      issued++;
      const cached = plan.cachedEvery !== undefined && issued % plan.cachedEvery === 0;
      track(cached ? send(t, `${plan.content} (cached)`, false, { 'x-gateway-cache': 'ttl=600' }) : send(t, plan.content, false));
    }
  }, 10);
  const streamers = Array.from({ length: plan.streams }, async () => {
    while (!stopped) {
      const s = send(t, plan.streamContent, true);
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
