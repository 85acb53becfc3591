import type { TokenUsage } from '../../domain/credits/pricing';
import type { CanonicalRequest, FinishReason, Message, StreamEvent, UpstreamAdapter, UpstreamUsage } from '../canonical';

// OpenAI-compatible chat completions upstream: request, response and stream transforms, usage.

interface OpenAIUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; audio_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number } | null;
  cost?: number | string;
}

interface ChatChoice {
  index?: number;
  finish_reason?: string | null;
  /** vLLM and compatible servers: the stop string that ended the answer */
  stop_reason?: string | number | null;
  message?: { content?: string | null; reasoning?: string | null; reasoning_content?: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> };
  delta?: {
    content?: string | null;
    reasoning?: string | null;
    reasoning_content?: string | null;
    tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }>;
    /** audio output: base64 `data` and `transcript` pieces (plus `id`, `expires_at`) */
    audio?: { data?: string; transcript?: string } | null;
  };
}

interface ChatBody {
  id?: string;
  model?: string;
  created?: number;
  choices?: ChatChoice[];
  usage?: OpenAIUsage | null;
}

const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Token usage and provider cost as reported; null when the provider reported no usage. */
export function extractUsage(u: unknown): UpstreamUsage | null {
  if (!u || typeof u !== 'object') return null;
  const x = u as OpenAIUsage;
  if (typeof x.prompt_tokens !== 'number' && typeof x.completion_tokens !== 'number') return null;
  const reasoning = x.completion_tokens_details?.reasoning_tokens;
  const tokens: TokenUsage = {
    prompt_tokens: count(x.prompt_tokens),
    completion_tokens: count(x.completion_tokens),
    cached_tokens: count(x.prompt_tokens_details?.cached_tokens),
    cache_write_tokens: count(x.prompt_tokens_details?.cache_write_tokens),
    reasoning_tokens: typeof reasoning === 'number' ? count(reasoning) : null,
    audio_input_tokens: count(x.prompt_tokens_details?.audio_tokens),
    audio_output_tokens: count(x.completion_tokens_details?.audio_tokens),
  };
  return { tokens, cost: parseCost(x.cost), raw: x as Record<string, unknown> };
}

export function parseCost(cost: unknown): string | null {
  if (typeof cost === 'number' && Number.isFinite(cost) && cost >= 0) return String(cost);
  if (typeof cost === 'string' && /^\d+(\.\d+)?$/.test(cost)) return cost;
  return null;
}

export const FINISH_FROM_OPENAI: Record<string, FinishReason> = { stop: 'stop', length: 'length', tool_calls: 'tool_calls', function_call: 'tool_calls', content_filter: 'content_filter' };

/** Canonical messages in the chat-completions shape. */
export function chatMessages(messages: Message[]): Array<Record<string, unknown>> {
  return messages.map((m) => {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: m.text };
      case 'tool':
        return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
      case 'user':
      case 'assistant': {
        const simple = m.parts.every((p) => p.type === 'text');
        const content = simple
          ? m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')
          : m.parts.map((p) =>
              p.type === 'text'
                ? { type: 'text', text: p.text }
                : p.type === 'image'
                  ? { type: 'image_url', image_url: { url: p.url } }
                  : { type: 'input_audio', input_audio: { data: p.data, format: p.format } },
            );
        if (m.role === 'user') return { role: 'user', content };
        const out: Record<string, unknown> = { role: 'assistant', content: simple && content === '' && m.toolCalls.length ? null : content };
        if (m.toolCalls.length) out.tool_calls = m.toolCalls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
        return out;
      }
    }
  });
}

export const openaiChat: UpstreamAdapter = {
  native: 'chat',
  path: () => 'v1/chat/completions',
  authHeaders: (key) => ({ authorization: `Bearer ${key}` }),

  nativeRequest(body, upstreamModel, stream) {
    const out: Record<string, unknown> = { ...body, model: upstreamModel };
    // The gateway turns usage reporting on itself (spec 1 section 4.7 item 3).
    if (stream) out.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
    return out;
  },

  /** Everything canonical has a chat field, except stop strings past the 4th (listed in `req.ignored`). */
  request(req: CanonicalRequest, upstreamModel, stream) {
    const out: Record<string, unknown> = { model: upstreamModel, messages: chatMessages(req.messages) };
    if (req.maxTokens !== null) out.max_tokens = req.maxTokens;
    if (req.temperature !== undefined) out.temperature = req.temperature;
    if (req.topP !== undefined) out.top_p = req.topP;
    if (req.stop.length) {
      // Chat takes at most 4 stop strings; only the messages dialect (stop_sequences) can send more.
      out.stop = req.stop.slice(0, 4);
      if (req.stop.length > 4) req.ignored.push('stop_sequences;truncated=4');
    }
    if (req.tools.length) out.tools = req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
    if (req.toolChoice) out.tool_choice = typeof req.toolChoice === 'string' ? req.toolChoice : { type: 'function', function: { name: req.toolChoice.name } };
    if (req.reasoningEffort) out.reasoning_effort = req.reasoningEffort;
    if (req.jsonSchema) out.response_format = { type: 'json_schema', json_schema: req.jsonSchema };
    if (req.user) out.user = req.user;
    if (stream) Object.assign(out, { stream: true, stream_options: { include_usage: true } });
    return out;
  },

  response(json, stop = []) {
    const b = json as ChatBody;
    const choice = b.choices?.[0];
    const msg = choice?.message;
    const finish = finishOf(choice, stop, msg?.content ?? '');
    return {
      id: b.id ?? '',
      model: b.model ?? '',
      created: b.created ?? Math.floor(Date.now() / 1000),
      text: msg?.content ?? '',
      reasoning: msg?.reasoning ?? msg?.reasoning_content ?? '',
      toolCalls: (msg?.tool_calls ?? []).map((t) => ({ id: t.id, name: t.function.name, arguments: t.function.arguments })),
      finish: finish.reason,
      stopSequence: finish.stopSequence,
      usage: extractUsage(b.usage),
    };
  },

  usage: (json) => extractUsage((json as ChatBody).usage),

  streamParser(stop = []) {
    let started = false;
    // the answer's tail, long enough to end with any stop sequence
    let tail = '';
    const keep = Math.max(0, ...stop.map((s) => s.length));
    return (ev) => {
      if (ev.data === null || ev.data === '[DONE]') return [];
      let chunk: ChatBody;
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        return [];
      }
      // Azure opens with a chunk holding only the prompt's filter results (no id, no choices): no answer yet.
      if (!started && !chunk.id && chunk.choices?.length === 0 && !chunk.usage) return [];
      const out: StreamEvent[] = [];
      if (!started) {
        started = true;
        out.push({ type: 'start', id: chunk.id ?? '', model: chunk.model ?? '' });
      }
      const choice = chunk.choices?.[0];
      const d = choice?.delta;
      if (d) {
        const reasoning = d.reasoning ?? d.reasoning_content;
        if (reasoning) out.push({ type: 'reasoning', text: reasoning });
        if (d.content) {
          out.push({ type: 'text', text: d.content });
          if (keep) tail = (tail + d.content).slice(-keep);
        }
        if (d.audio?.data || d.audio?.transcript) out.push({ type: 'audio', transcript: d.audio.transcript ?? '', bytes: d.audio.data ? Buffer.byteLength(d.audio.data, 'base64') : 0 });
        for (const t of d.tool_calls ?? []) {
          if (t.id) out.push({ type: 'tool_call', index: t.index, id: t.id, name: t.function?.name ?? '' });
          if (t.function?.arguments) out.push({ type: 'tool_args', index: t.index, fragment: t.function.arguments });
        }
      }
      if (choice?.finish_reason) out.push({ type: 'finish', ...finishOf(choice, stop, tail) });
      const usage = extractUsage(chunk.usage);
      if (usage) out.push({ type: 'usage', usage });
      return out;
    };
  },

  errorMessage: (json) => (json as { error?: { message?: string } })?.error?.message ?? null,
};

/**
 * OpenAI reports a stop-sequence hit as finish_reason `stop` and leaves the sequence out of the
 * text. The match: the one the server names (vLLM's `stop_reason`); else the only sequence asked;
 * else, of several, the one the text ends with (servers that keep it). Not found: a plain stop.
 */
function finishOf(choice: ChatChoice | undefined, stop: readonly string[], text: string): { reason: FinishReason; stopSequence: string | null } {
  const reason: FinishReason = FINISH_FROM_OPENAI[choice?.finish_reason ?? 'stop'] ?? 'stop';
  if (reason !== 'stop' || stop.length === 0) return { reason, stopSequence: null };
  const named = typeof choice?.stop_reason === 'string' && stop.includes(choice.stop_reason) ? choice.stop_reason : null;
  const hit = named ?? (stop.length === 1 ? stop[0] : (stop.find((s) => text.endsWith(s)) ?? null));
  return hit === null ? { reason, stopSequence: null } : { reason: 'stop_sequence', stopSequence: hit };
}
