import { z } from 'zod';
import { GatewayError } from '../../../../domain/shared/errors';
import type { CanonicalRequest, FinishReason, Message, Part } from '../../../../providers/canonical';
import { NO_AUDIO, vendorId, type Billing, type ClientDialect } from './types';

// Messages (Anthropic): the client dialect, translated from and to the canonical form.

const block = z.object({ type: z.string() }).passthrough();

export const messagesRequestSchema = z
  .object({
    model: z.string().min(1),
    max_tokens: z.number().int().positive(),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.union([z.string(), z.array(block)]) }).strict()).min(1),
    system: z.union([z.string(), z.array(block)]).optional(),
    stop_sequences: z.array(z.string()).optional(),
    stream: z.boolean().optional(),
    temperature: z.number().min(0).max(1).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    tools: z.array(z.object({ name: z.string().min(1), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()).optional() }).passthrough()).optional(),
    tool_choice: z.object({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional(), disable_parallel_tool_use: z.boolean().optional() }).strict().optional(),
    metadata: z.object({ user_id: z.string().nullable().optional() }).strict().optional(),
    thinking: z.union([z.object({ type: z.literal('enabled'), budget_tokens: z.number().int().min(1) }).strict(), z.object({ type: z.literal('disabled') }).strict()]).optional(),
    service_tier: z.enum(['auto', 'standard_only']).optional(),
  })
  .strict();

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;
type Block = z.infer<typeof block> & Record<string, unknown>;

const FINISH_TO_ANTHROPIC: Record<FinishReason, string> = { stop: 'end_turn', stop_sequence: 'stop_sequence', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'refusal' };

function imagePart(b: Block): Part {
  const src = b.source as { type?: string; media_type?: string; data?: string; url?: string } | undefined;
  if (src?.type === 'base64') return { type: 'image', url: `data:${src.media_type};base64,${src.data}` };
  if (src?.type === 'url' && src.url) return { type: 'image', url: src.url };
  throw new GatewayError('invalid_parameter', { param: 'messages', detail: 'image source must be base64 or url' });
}

const textOfContent = (c: unknown): string =>
  typeof c === 'string' ? c : Array.isArray(c) ? c.map((x: { type?: string; text?: string }) => (x.type === 'text' ? (x.text ?? '') : '')).join('') : '';

function toMessages(m: MessagesRequest['messages'][number]): Message[] {
  const blocks: Block[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content as Block[]);
  const out: Message[] = [];
  const parts: Part[] = [];
  const toolCalls: Array<{ id: string; name: string; arguments: string }> = [];
  for (const b of blocks) {
    if (b.type === 'text') parts.push({ type: 'text', text: String(b.text ?? '') });
    else if (b.type === 'image') parts.push(imagePart(b));
    else if (b.type === 'tool_use' && m.role === 'assistant') toolCalls.push({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.input ?? {}) });
    else if (b.type === 'tool_result' && m.role === 'user') out.push({ role: 'tool', toolCallId: String(b.tool_use_id), content: textOfContent(b.content) });
    else if (b.type === 'thinking' || b.type === 'redacted_thinking') continue; // signed by the vendor; other upstreams cannot use it
    else throw new GatewayError('unsupported_parameter', { param: 'messages', detail: `content block '${b.type}' is not supported in a ${m.role} message` });
  }
  if (m.role === 'assistant') out.push({ role: 'assistant', parts, toolCalls });
  else if (parts.length) out.push({ role: 'user', parts });
  return out;
}

function toCanonical(req: MessagesRequest): CanonicalRequest {
  const system = req.system === undefined ? [] : [{ role: 'system' as const, text: textOfContent(req.system) }];
  const c = req.tool_choice;
  return {
    messages: [...system, ...req.messages.flatMap(toMessages)],
    maxTokens: req.max_tokens,
    temperature: req.temperature,
    topP: req.top_p,
    stop: req.stop_sequences ?? [],
    tools: (req.tools ?? []).map((t) => ({ name: t.name, description: t.description, parameters: (t.input_schema as Record<string, unknown>) ?? { type: 'object', properties: {} } })),
    toolChoice: c === undefined ? undefined : c.type === 'auto' ? 'auto' : c.type === 'none' ? 'none' : c.type === 'any' ? 'required' : { name: c.name ?? '' },
    user: req.metadata?.user_id ?? undefined,
    ignored: [],
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
  async inspect(req) {
    // Passed through natively, an audio block would reach the provider after the hold.
    for (const [i, m] of req.messages.entries()) {
      const j = Array.isArray(m.content) ? m.content.findIndex((b) => b.type === 'input_audio' || b.type === 'audio') : -1;
      if (j !== -1) throw new GatewayError('unsupported_parameter', { param: `messages[${i}].content[${j}]`, detail: 'audio input is served by /v1/chat/completions only' });
    }
    return NO_AUDIO;
  },
  withMaxTokens: (body, n) => ({ ...body, max_tokens: n }),
  toCanonical,
  promptTokenBound: (req) => Buffer.byteLength(JSON.stringify([req.system ?? '', req.messages, req.tools ?? []])) + 2000 * JSON.stringify(req.messages).split('"type":"image"').length,
  promptTokenEstimate: (req) => Math.ceil((textOfContent(req.system) + req.messages.map((m) => textOfContent(m.content)).join('')).length / 4) + 4 * req.messages.length,

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
