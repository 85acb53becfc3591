import type { TokenUsage } from '../../domain/pricing';

// OpenAI-compatible chat completions: request transform, usage extraction, stream chunk reading.

export const CHAT_PATH = 'v1/chat/completions';

export function chatRequest(body: Record<string, unknown>, upstreamModel: string, stream: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body, model: upstreamModel };
  // The gateway turns usage reporting on itself (spec 4.7 item 3).
  if (stream) out.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
  return out;
}

interface OpenAIUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
  cost?: number | string;
}

const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Token usage and provider cost as reported; null when the provider reported no usage. */
export function extractUsage(u: unknown): { usage: TokenUsage; cost: string | null } | null {
  if (!u || typeof u !== 'object') return null;
  const x = u as OpenAIUsage;
  if (typeof x.prompt_tokens !== 'number' && typeof x.completion_tokens !== 'number') return null;
  const reasoning = x.completion_tokens_details?.reasoning_tokens;
  const cost = x.cost;
  return {
    usage: {
      prompt_tokens: count(x.prompt_tokens),
      completion_tokens: count(x.completion_tokens),
      cached_tokens: count(x.prompt_tokens_details?.cached_tokens),
      cache_write_tokens: count(x.prompt_tokens_details?.cache_write_tokens),
      reasoning_tokens: typeof reasoning === 'number' ? count(reasoning) : null,
    },
    cost: (typeof cost === 'number' && Number.isFinite(cost) && cost >= 0) || (typeof cost === 'string' && /^\d+(\.\d+)?$/.test(cost)) ? String(cost) : null,
  };
}

/** Text of a chat chunk's first choice delta (content, reasoning, tool arguments). */
export function deltaText(chunk: { choices?: Array<{ delta?: Record<string, unknown> }> }): string {
  const d = chunk.choices?.[0]?.delta;
  if (!d) return '';
  let s = typeof d.content === 'string' ? d.content : '';
  if (typeof d.reasoning === 'string') s += d.reasoning;
  if (Array.isArray(d.tool_calls)) s += JSON.stringify(d.tool_calls);
  return s;
}
