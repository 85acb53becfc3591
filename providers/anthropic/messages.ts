import { GatewayError } from '../../domain/shared/errors';
import { parseCost } from '../openai/chat';
import type { CanonicalRequest, FinishReason, Message, Part, StreamEvent, UpstreamAdapter, UpstreamUsage } from '../canonical';

// Anthropic Messages upstream: request, response and stream transforms, usage. A translated
// request names in `req.ignored` what the Messages format cannot carry (docs/gateway.md).

interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cost?: number | string;
}

interface Block {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  input?: unknown;
}

interface MessageBody {
  id?: string;
  model?: string;
  content?: Block[];
  stop_reason?: string | null;
  stop_sequence?: string | null;
  usage?: AnthropicUsage;
}

export const ANTHROPIC_VERSION = '2023-06-01';

const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Anthropic's input_tokens excludes cache reads and writes; the gateway's prompt_tokens includes them. */
export function anthropicUsage(u: AnthropicUsage | undefined | null): UpstreamUsage | null {
  if (!u || (typeof u.input_tokens !== 'number' && typeof u.output_tokens !== 'number')) return null;
  const cacheRead = n(u.cache_read_input_tokens);
  const cacheWrite = n(u.cache_creation_input_tokens);
  return {
    tokens: {
      prompt_tokens: n(u.input_tokens) + cacheRead + cacheWrite,
      completion_tokens: n(u.output_tokens),
      cached_tokens: cacheRead,
      cache_write_tokens: cacheWrite,
      reasoning_tokens: null, // Anthropic bills thinking as output and does not count it apart
    },
    cost: parseCost(u.cost),
    raw: u as Record<string, unknown>,
  };
}

export const FINISH_FROM_ANTHROPIC: Record<string, FinishReason> = {
  end_turn: 'stop',
  max_tokens: 'length',
  stop_sequence: 'stop_sequence',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
  pause_turn: 'stop',
};

function imageBlock(url: string) {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  if (m) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } };
  return { type: 'image', source: { type: 'url', url } };
}

function blocks(parts: Part[]): Array<Record<string, unknown>> {
  return parts.map((p) => {
    if (p.type === 'text') return { type: 'text', text: p.text };
    if (p.type === 'image') return imageBlock(p.url);
    throw new GatewayError('unsupported_parameter', { param: 'messages', detail: 'this model does not take audio input' });
  });
}

function parseArgs(args: string): unknown {
  try {
    return JSON.parse(args || '{}');
  } catch {
    return { _raw: args };
  }
}

/**
 * Canonical messages as Anthropic turns: leading system messages as `system`, later ones as
 * system messages at their place, tool results as user blocks, same roles merged.
 */
export function anthropicMessages(messages: Message[]): { system: string | undefined; messages: Array<{ role: string; content: string | Array<Record<string, unknown>> }> } {
  const lead = messages.findIndex((m) => m.role !== 'system');
  const head = lead === -1 ? messages : messages.slice(0, lead);
  const system = head.map((m) => (m as { text: string }).text);
  const turns: Array<{ role: string; content: string | Array<Record<string, unknown>> }> = [];
  const push = (role: 'user' | 'assistant', content: Array<Record<string, unknown>>) => {
    const last = turns.at(-1);
    if (last && last.role === role && Array.isArray(last.content)) last.content.push(...content);
    else turns.push({ role, content });
  };
  for (const m of lead === -1 ? [] : messages.slice(lead)) {
    if (m.role === 'system') turns.push({ role: 'system', content: m.text });
    else if (m.role === 'user') push('user', blocks(m.parts));
    else if (m.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: m.toolCallId, content: m.content }]);
    else {
      const content = blocks(m.parts.filter((p) => p.type !== 'text' || p.text !== ''));
      for (const t of m.toolCalls) content.push({ type: 'tool_use', id: t.id, name: t.name, input: parseArgs(t.arguments) });
      push('assistant', content);
    }
  }
  return { system: system.length ? system.join('\n\n') : undefined, messages: turns };
}

/**
 * A reasoning effort as Anthropic's: adaptive thinking at that effort ('none' and 'minimal', which
 * Anthropic's effort lacks: thinking off, low effort). A forced tool choice does not go with thinking: the effort alone then.
 */
function thinkingOf(req: CanonicalRequest): Record<string, unknown> {
  const e = req.reasoningEffort;
  if (!e) return {};
  const forced = req.toolChoice === 'required' || typeof req.toolChoice === 'object';
  if (e === 'none' || e === 'minimal') return { thinking: { type: 'disabled' }, effort: 'low' };
  return forced ? { effort: e } : { thinking: { type: 'adaptive' }, effort: e };
}

export const anthropicMessagesAdapter: UpstreamAdapter = {
  native: 'messages',
  path: () => 'v1/messages',
  authHeaders: (key) => ({ 'x-api-key': key, 'anthropic-version': ANTHROPIC_VERSION }),
  // the beta features the client's body uses (context_management, interleaved thinking…)
  nativeHeaders: ['anthropic-beta'],

  nativeRequest: (body, upstreamModel) => ({ ...body, model: upstreamModel }),

  request(req: CanonicalRequest, upstreamModel, stream) {
    const { system, messages } = anthropicMessages(req.messages);
    const out: Record<string, unknown> = { model: upstreamModel, max_tokens: req.maxTokens, messages };
    if (system) out.system = system;
    const { thinking, effort } = thinkingOf(req);
    if (thinking) out.thinking = thinking;
    // With thinking on, Anthropic takes no sampling changes: those are dropped and reported.
    if (req.temperature !== undefined) {
      if (thinking && (thinking as { type: string }).type !== 'disabled') req.ignored.push('temperature');
      else if (req.temperature > 1) {
        out.temperature = 1;
        req.ignored.push('temperature;clamped=1');
      } else out.temperature = req.temperature;
    }
    if (req.topP !== undefined) {
      if (thinking && (thinking as { type: string }).type !== 'disabled') req.ignored.push('top_p');
      else out.top_p = req.topP;
    }
    if (req.stop.length) out.stop_sequences = req.stop;
    if (req.tools.length) out.tools = req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
    if (req.toolChoice) {
      const c = req.toolChoice;
      out.tool_choice = c === 'auto' ? { type: 'auto' } : c === 'none' ? { type: 'none' } : c === 'required' ? { type: 'any' } : { type: 'tool', name: c.name };
    }
    const outputConfig: Record<string, unknown> = {};
    if (effort) outputConfig.effort = effort;
    if (req.jsonSchema) outputConfig.format = { type: 'json_schema', schema: req.jsonSchema.schema };
    if (Object.keys(outputConfig).length) out.output_config = outputConfig;
    if (req.user) out.metadata = { user_id: req.user };
    if (stream) out.stream = true;
    return out;
  },

  response(json) {
    const b = json as MessageBody;
    const content = b.content ?? [];
    return {
      id: b.id ?? '',
      model: b.model ?? '',
      created: Math.floor(Date.now() / 1000),
      text: content.filter((c) => c.type === 'text').map((c) => c.text ?? '').join(''),
      reasoning: content.filter((c) => c.type === 'thinking').map((c) => c.thinking ?? '').join(''),
      toolCalls: content.filter((c) => c.type === 'tool_use').map((c) => ({ id: c.id ?? '', name: c.name ?? '', arguments: JSON.stringify(c.input ?? {}) })),
      finish: FINISH_FROM_ANTHROPIC[b.stop_reason ?? 'end_turn'] ?? 'stop',
      stopSequence: b.stop_sequence ?? null,
      usage: anthropicUsage(b.usage),
    };
  },

  usage: (json) => anthropicUsage((json as MessageBody).usage),

  streamParser() {
    const usage: AnthropicUsage = {};
    let seenUsage = false;
    const toolIndex = new Map<number, number>();
    return (ev) => {
      if (ev.data === null) return [];
      let e: { type?: string; index?: number; message?: MessageBody; content_block?: Block; delta?: Record<string, string | undefined>; usage?: AnthropicUsage; error?: { message?: string } };
      try {
        e = JSON.parse(ev.data);
      } catch {
        return [];
      }
      const out: StreamEvent[] = [];
      const merge = (u: AnthropicUsage | undefined) => {
        if (!u) return;
        seenUsage = true;
        for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) (usage as Record<string, unknown>)[k] = v;
      };
      switch (e.type) {
        case 'message_start':
          merge(e.message?.usage);
          out.push({ type: 'start', id: e.message?.id ?? '', model: e.message?.model ?? '' });
          break;
        case 'content_block_start':
          if (e.content_block?.type === 'tool_use') {
            const index = toolIndex.size;
            toolIndex.set(e.index ?? 0, index);
            out.push({ type: 'tool_call', index, id: e.content_block.id ?? '', name: e.content_block.name ?? '' });
          }
          break;
        case 'content_block_delta': {
          const d = e.delta ?? {};
          if (d.type === 'text_delta' && d.text) out.push({ type: 'text', text: d.text });
          else if (d.type === 'thinking_delta' && d.thinking) out.push({ type: 'reasoning', text: d.thinking });
          else if (d.type === 'input_json_delta' && d.partial_json) out.push({ type: 'tool_args', index: toolIndex.get(e.index ?? 0) ?? 0, fragment: d.partial_json });
          break;
        }
        case 'message_delta':
          merge(e.usage);
          if (e.delta?.stop_reason) out.push({ type: 'finish', reason: FINISH_FROM_ANTHROPIC[e.delta.stop_reason] ?? 'stop', stopSequence: e.delta.stop_sequence ?? null });
          break;
        case 'message_stop': {
          const u = seenUsage ? anthropicUsage(usage) : null;
          if (u) out.push({ type: 'usage', usage: u });
          break;
        }
        case 'error':
          throw new Error(`provider stream error: ${e.error?.message ?? 'unknown'}`);
      }
      return out;
    };
  },

  errorMessage: (json) => (json as { error?: { message?: string } })?.error?.message ?? null,
};
