import { GatewayError } from '../../../../domain/shared/errors';
import type { CanonicalRequest, FinishReason, Message, Part } from '../../../../providers/canonical';
import { messagesRequestSchema, type MessagesBlock, type MessagesMessage, type MessagesRequest } from '../messages-schema';
import { vendorId, type Billing, type ClientDialect } from './types';

// Messages (Anthropic): the client dialect, translated from and to the canonical form. What the
// canonical form cannot carry is dropped and named in `ignored` (docs/gateway.md, the table).

const FINISH_TO_ANTHROPIC: Record<FinishReason, string> = { stop: 'end_turn', stop_sequence: 'stop_sequence', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'refusal' };

const textOfContent = (c: unknown): string =>
  typeof c === 'string' ? c : Array.isArray(c) ? c.map((x: { type?: string; text?: string }) => (x.type === 'text' ? (x.text ?? '') : '')).join('') : '';

/** the names a translation drops, once each */
type Dropped = Set<string>;

function imagePart(b: MessagesBlock, dropped: Dropped): Part | null {
  const src = b.source as { type?: string; media_type?: string; data?: string; url?: string };
  if (src.type === 'base64') return { type: 'image', url: `data:${src.media_type};base64,${src.data}` };
  if (src.type === 'url' && src.url) return { type: 'image', url: src.url };
  dropped.add('messages.content.image.source.file'); // a Files API id only Anthropic resolves
  return null;
}

/** A document's text when it has one (plain text or content sources); PDFs and files have none here. */
function documentText(b: MessagesBlock): string | null {
  const src = b.source as { type?: string; data?: string; content?: unknown };
  const title = typeof b.title === 'string' ? `${b.title}\n` : '';
  if (src?.type === 'text' && typeof src.data === 'string') return title + src.data;
  if (src?.type === 'content') return title + textOfContent(src.content);
  return null;
}

function toMessages(m: MessagesMessage, dropped: Dropped): Message[] {
  if (m.role === 'system') {
    // mid-conversation instructions stay at their place: the target's system role
    if (m.clear_at !== undefined) dropped.add('messages.clear_at');
    if (m.output_config !== undefined) dropped.add('messages.output_config');
    if (Array.isArray(m.content) && m.content.some((b) => b.type !== 'text')) dropped.add('messages.content.tool_addition');
    const text = textOfContent(m.content);
    return text ? [{ role: 'system', text }] : [];
  }
  const blocks = (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content) as MessagesBlock[];
  const out: Message[] = [];
  const parts: Part[] = [];
  const toolCalls: Array<{ id: string; name: string; arguments: string }> = [];
  for (const b of blocks) {
    if (b.cache_control != null) dropped.add('messages.content.cache_control');
    if (b.citations != null) dropped.add('messages.content.citations');
    if (b.type === 'text') parts.push({ type: 'text', text: String(b.text) });
    else if (b.type === 'image') {
      const p = imagePart(b, dropped);
      if (p) parts.push(p);
    } else if (b.type === 'document') {
      const text = documentText(b);
      if (text === null) dropped.add('messages.content.document');
      else parts.push({ type: 'text', text });
    } else if (b.type === 'search_result') {
      parts.push({ type: 'text', text: `${String(b.title)} (${String(b.source)})\n${textOfContent(b.content)}` });
    } else if (b.type === 'compaction' && typeof b.content === 'string') {
      parts.push({ type: 'text', text: b.content }); // the summary of the earlier conversation
    } else if (b.type === 'tool_use' && m.role === 'assistant') {
      toolCalls.push({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.input ?? {}) });
    } else if (b.type === 'tool_result' && m.role === 'user') {
      if (b.is_error === true) dropped.add('messages.content.is_error');
      if (Array.isArray(b.content) && b.content.some((x) => x.type !== 'text')) dropped.add('messages.content.tool_result.content');
      out.push({ role: 'tool', toolCallId: String(b.tool_use_id), content: textOfContent(b.content) });
    } else if (b.type === 'tool_use' || b.type === 'tool_result') {
      throw new GatewayError('invalid_parameter', { param: 'messages', detail: `a ${b.type} block belongs in ${b.type === 'tool_use' ? 'an assistant' : 'a user'} message` });
    } else dropped.add(`messages.content.${b.type}`); // thinking (signed), server tool results, beta blocks
  }
  if (m.role === 'assistant') out.push({ role: 'assistant', parts, toolCalls });
  else if (parts.length) out.push({ role: 'user', parts });
  return out;
}

/** about 4 characters a token, 4 tokens a message (count_tokens answers this too) */
export const promptTokenEstimate = (req: Pick<MessagesRequest, 'system' | 'messages'>) =>
  Math.ceil((textOfContent(req.system) + req.messages.map((m) => textOfContent(m.content)).join('')).length / 4) + 4 * req.messages.length;

type Effort = NonNullable<CanonicalRequest['reasoningEffort']>;
const EFFORT: Record<string, Effort> = { low: 'low', medium: 'medium', high: 'high', xhigh: 'high', max: 'high' };

/** thinking and output_config.effort as one reasoning effort; undefined = the upstream's default */
function reasoningEffort(req: MessagesRequest, dropped: Dropped): Effort | undefined {
  const t = req.thinking;
  if (t?.type === 'between_tools') dropped.add('thinking');
  if (t && ('display' in t || 'block_binding' in t)) dropped.add('thinking.display');
  const effort = req.output_config?.effort;
  if (t?.type === 'disabled') return 'minimal';
  if (effort) return EFFORT[effort];
  if (t?.type === 'enabled') return t.budget_tokens < 4096 ? 'low' : t.budget_tokens < 16384 ? 'medium' : 'high';
  return undefined;
}

/** Top-level fields an upstream of another format has no equivalent for. */
const UNMAPPED = ['top_k', 'service_tier', 'container', 'diagnostics', 'inference_geo', 'speed', 'user_profile_id', 'workspace_id', 'context_management', 'mcp_servers', 'compaction', 'billing_policy', 'fallbacks', 'fallback_credit_token', 'thread', 'cache_control'] as const;

function toCanonical(req: MessagesRequest): CanonicalRequest {
  const dropped: Dropped = new Set();
  for (const name of UNMAPPED) if (req[name] != null) dropped.add(name);
  if (Array.isArray(req.system) && req.system.some((b) => b.cache_control != null)) dropped.add('system.cache_control');
  const system: Message[] = req.system === undefined ? [] : [{ role: 'system', text: textOfContent(req.system) }];
  // Anthropic-defined tools (server tools run by Anthropic, schema-less client tools) have no
  // equivalent elsewhere: dropped, with a forced choice of one of them.
  const custom = (req.tools ?? []).filter((t) => {
    if (t.type == null || t.type === 'custom') return true;
    dropped.add(`tools.${t.type}`);
    return false;
  });
  for (const t of custom) for (const k of ['cache_control', 'defer_loading', 'allowed_callers', 'input_examples', 'eager_input_streaming', 'strict']) if (t[k] != null) dropped.add(`tools.${k}`);
  const chosen = req.tool_choice;
  const c = chosen?.type === 'tool' && !custom.some((t) => t.name === chosen.name) ? undefined : chosen;
  if (chosen && !c) dropped.add('tool_choice');
  if (c && 'disable_parallel_tool_use' in c && c.disable_parallel_tool_use !== undefined) dropped.add('tool_choice.disable_parallel_tool_use');
  if (req.output_config?.task_budget != null) dropped.add('output_config.task_budget');
  const format = req.output_config?.format ?? req.output_format;
  const messages = req.messages.flatMap((m) => toMessages(m, dropped));
  return {
    messages: [...system, ...messages],
    maxTokens: req.max_tokens,
    temperature: req.temperature,
    topP: req.top_p,
    stop: req.stop_sequences ?? [],
    tools: custom.map((t) => ({ name: t.name!, description: t.description, parameters: t.input_schema! })),
    toolChoice: c === undefined ? undefined : c.type === 'auto' ? 'auto' : c.type === 'none' ? 'none' : c.type === 'any' ? 'required' : { name: c.name },
    reasoningEffort: reasoningEffort(req, dropped),
    jsonSchema: format ? { name: 'output', schema: format.schema } : undefined,
    user: req.metadata?.user_id ?? undefined,
    ignored: [...dropped],
  };
}

function usageOf(b: Billing) {
  if (!b.usage) return undefined;
  const t = b.usage.tokens;
  return {
    input_tokens: Math.max(0, t.prompt_tokens - t.cached_tokens - t.cache_write_tokens),
    output_tokens: t.completion_tokens,
    cache_creation_input_tokens: t.cache_write_tokens,
    cache_read_input_tokens: t.cached_tokens,
  };
}

// Anthropic's error types by HTTP status.
const ERROR_TYPE: Record<number, string> = { 400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 403: 'permission_error', 404: 'not_found_error', 413: 'request_too_large', 415: 'invalid_request_error', 429: 'rate_limit_error', 503: 'overloaded_error' };
const errorOf = (e: GatewayError) => ({ type: 'error', error: { type: ERROR_TYPE[e.status] ?? 'api_error', message: e.message } });

export const messagesDialect: ClientDialect<MessagesRequest> = {
  name: 'messages',
  endpoint: '/v1/messages',
  schema: messagesRequestSchema,
  model: (req) => req.model,
  stream: (req) => req.stream === true,
  maxTokens: (req) => req.max_tokens,
  withMaxTokens: (body, n) => ({ ...body, max_tokens: n }),
  toCanonical,
  promptTokenBound: (req) => Buffer.byteLength(JSON.stringify([req.system ?? '', req.messages, req.tools ?? []])) + 2000 * JSON.stringify(req.messages).split('"type":"image"').length,
  promptTokenEstimate,

  render(resp, billing, ctx) {
    const content: Array<Record<string, unknown>> = [];
    if (resp.text) content.push({ type: 'text', text: resp.text });
    for (const t of resp.toolCalls) {
      let input: unknown;
      try {
        input = JSON.parse(t.arguments || '{}');
      } catch {
        input = { _raw: t.arguments };
      }
      content.push({ type: 'tool_use', id: t.id, name: t.name, input });
    }
    const id = vendorId('msg_', ctx.requestId);
    const body: Record<string, unknown> = { id, type: 'message', role: 'assistant', model: ctx.model, content, stop_reason: FINISH_TO_ANTHROPIC[resp.finish], stop_sequence: resp.stopSequence };
    const usage = usageOf(billing);
    if (usage) body.usage = usage;
    return { id, body };
  },

  renderNative: (json) => ({ id: String(json.id ?? ''), body: json }),

  streamWriter(write, ctx) {
    const send = (type: string, data: Record<string, unknown>) => write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    let started = false;
    let open: { index: number; kind: 'text' | 'tool'; tool?: number } | null = null;
    let index = -1;
    let finish: FinishReason = 'stop';
    let stopSequence: string | null = null;
    let isNative = false;
    const start = () => {
      if (started) return;
      started = true;
      const message = { id: vendorId('msg_', ctx.requestId), type: 'message', role: 'assistant', model: ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } };
      send('message_start', { message });
      send('ping', {});
    };
    const close = () => {
      if (open) send('content_block_stop', { index: open.index });
      open = null;
    };
    return {
      native(raw) {
        isNative = true; // the upstream's own events, message_stop included
        write(raw + '\n\n');
      },
      event(e) {
        if (e.type === 'start') return start();
        start();
        if (e.type === 'text') {
          if (open?.kind !== 'text') {
            close();
            open = { index: ++index, kind: 'text' };
            send('content_block_start', { index, content_block: { type: 'text', text: '' } });
          }
          send('content_block_delta', { index: open.index, delta: { type: 'text_delta', text: e.text } });
        } else if (e.type === 'tool_call') {
          close();
          open = { index: ++index, kind: 'tool', tool: e.index };
          send('content_block_start', { index, content_block: { type: 'tool_use', id: e.id, name: e.name, input: {} } });
        } else if (e.type === 'tool_args' && open?.kind === 'tool') {
          send('content_block_delta', { index: open.index, delta: { type: 'input_json_delta', partial_json: e.fragment } });
        } else if (e.type === 'finish') {
          finish = e.reason;
          stopSequence = e.stopSequence;
        }
      },
      end(billing) {
        if (isNative) return;
        start();
        close();
        const usage = usageOf(billing);
        send('message_delta', { delta: { stop_reason: FINISH_TO_ANTHROPIC[finish], stop_sequence: stopSequence }, ...(usage ? { usage } : {}) });
        send('message_stop', {});
      },
      fail(e) {
        write(`event: error\ndata: ${JSON.stringify(errorOf(e))}\n\n`);
      },
    };
  },

  errorBody: errorOf,
};
