import { z } from 'zod';
import { GatewayError } from '../../../../domain/shared/errors';
import type { CanonicalRequest, CanonicalResponse, Message, Part, ToolCall } from '../../../../providers/canonical';
import { vendorId, type Billing, type ClientDialect, type RenderContext } from './types';

// Responses (OpenAI): the client dialect, translated from and to the canonical form. The gateway
// stores nothing, so conversation state (previous_response_id, store) is not offered.

// input_audio is known only to be refused clearly (audio input is chat only).
const contentPart = z.object({ type: z.enum(['input_text', 'output_text', 'input_image', 'input_audio', 'refusal']) }).passthrough();
const item = z.union([
  z.object({ type: z.literal('message').optional(), id: z.string().optional(), status: z.string().optional(), role: z.enum(['user', 'assistant', 'system', 'developer']), content: z.union([z.string(), z.array(contentPart)]) }).strict(),
  z.object({ type: z.literal('function_call'), id: z.string().optional(), call_id: z.string(), name: z.string(), arguments: z.string(), status: z.string().optional() }).strict(),
  z.object({ type: z.literal('function_call_output'), id: z.string().optional(), call_id: z.string(), output: z.union([z.string(), z.array(contentPart)]), status: z.string().optional() }).strict(),
  z.object({ type: z.literal('reasoning') }).passthrough(),
]);

export const responsesRequestSchema = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string(), z.array(item)]),
    instructions: z.string().nullable().optional(),
    max_output_tokens: z.number().int().positive().nullable().optional(),
    stream: z.boolean().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    tools: z.array(z.object({ type: z.literal('function'), name: z.string().min(1), description: z.string().nullable().optional(), parameters: z.record(z.string(), z.unknown()).nullable().optional(), strict: z.boolean().nullable().optional() }).strict()).optional(),
    tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.object({ type: z.literal('function'), name: z.string() }).strict()]).optional(),
    parallel_tool_calls: z.boolean().nullable().optional(),
    reasoning: z.object({ effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(), summary: z.enum(['auto', 'concise', 'detailed']).nullable().optional() }).strict().nullable().optional(),
    text: z.object({ format: z.object({ type: z.enum(['text', 'json_schema', 'json_object']) }).passthrough().optional(), verbosity: z.enum(['low', 'medium', 'high']).nullable().optional() }).strict().optional(),
    metadata: z.record(z.string(), z.string()).nullable().optional(),
    user: z.string().optional(),
    store: z.literal(false, { message: 'the gateway stores no responses; send store: false or omit it' }).optional(),
    previous_response_id: z.null().optional(),
    truncation: z.enum(['auto', 'disabled']).nullable().optional(),
    service_tier: z.string().nullable().optional(),
    safety_identifier: z.string().optional(),
    prompt_cache_key: z.string().optional(),
  })
  .strict();

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
type Item = z.infer<typeof item>;
type ContentPart = z.infer<typeof contentPart> & Record<string, unknown>;

function parts(content: string | ContentPart[]): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return content.map((p): Part => {
    if (p.type === 'input_audio') throw new GatewayError('unsupported_parameter', { param: 'input', detail: 'audio input is served by /v1/chat/completions only' });
    if (p.type === 'input_image') {
      if (typeof p.image_url !== 'string') throw new GatewayError('unsupported_parameter', { param: 'input', detail: 'input_image needs image_url (file ids are not supported)' });
      return { type: 'image', url: p.image_url };
    }
    return { type: 'text', text: String(p.text ?? p.refusal ?? '') };
  });
}

const text = (ps: Part[]) => ps.map((p) => (p.type === 'text' ? p.text : '')).join('');

function toMessages(items: Item[]): Message[] {
  const out: Message[] = [];
  for (const it of items) {
    if (it.type === 'reasoning') continue; // opaque to other upstreams
    if (it.type === 'function_call') {
      const last = out.at(-1);
      const call: ToolCall = { id: it.call_id, name: it.name, arguments: it.arguments };
      if (last?.role === 'assistant') last.toolCalls.push(call);
      else out.push({ role: 'assistant', parts: [], toolCalls: [call] });
    } else if (it.type === 'function_call_output') {
      out.push({ role: 'tool', toolCallId: it.call_id, content: typeof it.output === 'string' ? it.output : text(parts(it.output as ContentPart[])) });
    } else if (it.role === 'system' || it.role === 'developer') {
      out.push({ role: 'system', text: text(parts(it.content as ContentPart[] | string)) });
    } else if (it.role === 'assistant') {
      out.push({ role: 'assistant', parts: parts(it.content as ContentPart[] | string), toolCalls: [] });
    } else {
      out.push({ role: 'user', parts: parts(it.content as ContentPart[] | string) });
    }
  }
  return out;
}

function toCanonical(req: ResponsesRequest): CanonicalRequest {
  const items: Item[] = typeof req.input === 'string' ? [{ role: 'user', content: req.input }] : req.input;
  const format = req.text?.format as { type: string; name?: string; schema?: Record<string, unknown>; strict?: boolean } | undefined;
  const tc = req.tool_choice;
  return {
    messages: [...(req.instructions ? [{ role: 'system' as const, text: req.instructions }] : []), ...toMessages(items)],
    maxTokens: req.max_output_tokens ?? null,
    temperature: req.temperature ?? undefined,
    topP: req.top_p ?? undefined,
    stop: [],
    tools: (req.tools ?? []).map((t) => ({ name: t.name, description: t.description ?? undefined, parameters: t.parameters ?? { type: 'object', properties: {} } })),
    toolChoice: tc === undefined ? undefined : typeof tc === 'string' ? tc : { name: tc.name },
    reasoningEffort: req.reasoning?.effort ?? undefined,
    jsonSchema: format?.type === 'json_schema' && format.schema ? { name: format.name ?? 'output', schema: format.schema, strict: format.strict } : undefined,
    user: req.user,
    ignored: [],
  };
}

function usageOf(b: Billing) {
  if (!b.usage) return null;
  const t = b.usage.tokens;
  return {
    input_tokens: t.prompt_tokens,
    input_tokens_details: { cached_tokens: t.cached_tokens },
    output_tokens: t.completion_tokens,
    output_tokens_details: { reasoning_tokens: t.reasoning_tokens ?? 0 },
    total_tokens: t.prompt_tokens + t.completion_tokens,
  };
}

/** The response object around its output items. */
function responseObject(ctx: RenderContext, status: string, output: unknown[], usage: unknown, incomplete: boolean) {
  return {
    id: vendorId('resp_', ctx.requestId),
    object: 'response',
    created_at: ctx.created,
    status,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    model: ctx.model,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    usage,
  };
}

const messageItem = (ctx: RenderContext, t: string, status = 'completed') => ({
  type: 'message',
  id: vendorId('msg_', ctx.requestId),
  status,
  role: 'assistant',
  content: t === '' && status !== 'completed' ? [] : [{ type: 'output_text', text: t, annotations: [] }],
});
const reasoningItem = (ctx: RenderContext, t: string) => ({ type: 'reasoning', id: vendorId('rs_', ctx.requestId), summary: [{ type: 'summary_text', text: t }] });
const callItem = (c: ToolCall, i: number, status = 'completed') => ({ type: 'function_call', id: `fc_${i}_${c.id}`, call_id: c.id, name: c.name, arguments: c.arguments, status });

function outputOf(resp: CanonicalResponse, ctx: RenderContext): unknown[] {
  const out: unknown[] = [];
  if (resp.reasoning) out.push(reasoningItem(ctx, resp.reasoning));
  if (resp.text || !resp.toolCalls.length) out.push(messageItem(ctx, resp.text));
  resp.toolCalls.forEach((c, i) => out.push(callItem(c, i)));
  return out;
}

export const responsesDialect: ClientDialect<ResponsesRequest> = {
  name: 'responses',
  endpoint: '/v1/responses',
  schema: responsesRequestSchema,
  model: (req) => req.model,
  stream: (req) => req.stream === true,
  maxTokens: (req) => req.max_output_tokens ?? null,
  withMaxTokens: (body, n) => ({ ...body, max_output_tokens: n }),
  toCanonical,
  promptTokenBound: (req) => Buffer.byteLength(JSON.stringify([req.instructions ?? '', req.input, req.tools ?? []])) + 2000 * JSON.stringify(req.input).split('"input_image"').length,
  promptTokenEstimate: (req) => Math.ceil(JSON.stringify([req.instructions ?? '', req.input]).length / 4),

  render(resp, billing, ctx) {
    const body = responseObject(ctx, resp.finish === 'length' ? 'incomplete' : 'completed', outputOf(resp, ctx), usageOf(billing), resp.finish === 'length');
    return { id: body.id, body };
  },

  // No upstream speaks responses natively yet; a native answer is passed on as it came.
  renderNative: (json) => ({ id: String(json.id ?? ''), body: json }),

  streamWriter(write, ctx) {
    let seq = 0;
    const send = (type: string, data: Record<string, unknown>) => write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
    let started = false;
    let reasoning = '';
    let textBuf = '';
    let textIndex: number | null = null;
    let reasoningIndex: number | null = null;
    let nextIndex = 0;
    const calls = new Map<number, { call: ToolCall; outputIndex: number }>();
    let finish = 'stop';
    const start = () => {
      if (started) return;
      started = true;
      const r = responseObject(ctx, 'in_progress', [], null, false);
      send('response.created', { response: r });
      send('response.in_progress', { response: r });
    };
    const closeReasoning = () => {
      if (reasoningIndex === null) return;
      const it = reasoningItem(ctx, reasoning);
      send('response.reasoning_summary_text.done', { item_id: it.id, output_index: reasoningIndex, summary_index: 0, text: reasoning });
      send('response.reasoning_summary_part.done', { item_id: it.id, output_index: reasoningIndex, summary_index: 0, part: it.summary[0] });
      send('response.output_item.done', { output_index: reasoningIndex, item: it });
    };
    return {
      native(raw) {
        write(raw + '\n\n');
      },
      event(e) {
        start();
        const msgId = vendorId('msg_', ctx.requestId);
        if (e.type === 'reasoning') {
          if (reasoningIndex === null) {
            reasoningIndex = nextIndex++;
            const it = { ...reasoningItem(ctx, ''), summary: [] };
            send('response.output_item.added', { output_index: reasoningIndex, item: it });
            send('response.reasoning_summary_part.added', { item_id: it.id, output_index: reasoningIndex, summary_index: 0, part: { type: 'summary_text', text: '' } });
          }
          reasoning += e.text;
          send('response.reasoning_summary_text.delta', { item_id: vendorId('rs_', ctx.requestId), output_index: reasoningIndex, summary_index: 0, delta: e.text });
        } else if (e.type === 'text') {
          if (textIndex === null) {
            textIndex = nextIndex++;
            send('response.output_item.added', { output_index: textIndex, item: messageItem(ctx, '', 'in_progress') });
            send('response.content_part.added', { item_id: msgId, output_index: textIndex, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
          }
          textBuf += e.text;
          send('response.output_text.delta', { item_id: msgId, output_index: textIndex, content_index: 0, delta: e.text, logprobs: [] });
        } else if (e.type === 'tool_call') {
          const c = { call: { id: e.id, name: e.name, arguments: '' }, outputIndex: nextIndex++ };
          calls.set(e.index, c);
          send('response.output_item.added', { output_index: c.outputIndex, item: callItem(c.call, e.index, 'in_progress') });
        } else if (e.type === 'tool_args') {
          const c = calls.get(e.index);
          if (!c) return;
          c.call.arguments += e.fragment;
          send('response.function_call_arguments.delta', { item_id: `fc_${e.index}_${c.call.id}`, output_index: c.outputIndex, delta: e.fragment });
        } else if (e.type === 'finish') {
          finish = e.reason;
        }
      },
      end(billing) {
        start();
        closeReasoning();
        const output: Array<{ index: number; item: unknown }> = [];
        if (reasoningIndex !== null) output.push({ index: reasoningIndex, item: reasoningItem(ctx, reasoning) });
        if (textIndex !== null) {
          const msgId = vendorId('msg_', ctx.requestId);
          const part = { type: 'output_text', text: textBuf, annotations: [] };
          send('response.output_text.done', { item_id: msgId, output_index: textIndex, content_index: 0, text: textBuf, logprobs: [] });
          send('response.content_part.done', { item_id: msgId, output_index: textIndex, content_index: 0, part });
          const item = messageItem(ctx, textBuf);
          send('response.output_item.done', { output_index: textIndex, item });
          output.push({ index: textIndex, item });
        }
        for (const [i, c] of calls) {
          send('response.function_call_arguments.done', { item_id: `fc_${i}_${c.call.id}`, output_index: c.outputIndex, arguments: c.call.arguments });
          const item = callItem(c.call, i);
          send('response.output_item.done', { output_index: c.outputIndex, item });
          output.push({ index: c.outputIndex, item });
        }
        const incomplete = finish === 'length';
        const response = responseObject(ctx, incomplete ? 'incomplete' : 'completed', output.sort((a, b) => a.index - b.index).map((o) => o.item), usageOf(billing), incomplete);
        send(incomplete ? 'response.incomplete' : 'response.completed', { response });
      },
      fail(e) {
        send('error', { code: e.code, message: e.message, param: e.param });
      },
    };
  },

  errorBody: (e) => e.toEnvelope(),
};
