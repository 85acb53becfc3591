import { GatewayError } from '../../../../domain/shared/errors';
import type { CanonicalRequest, FinishReason, Message, Part, ToolCall } from '../../../../providers/canonical';
import { chatRequestSchema, promptTokenBound, promptTokenEstimate, type ChatRequest } from '../chat-schema';
import { chatUsage } from '../../shared/usage-view';
import { inspectChatAudio } from './chat-audio';
import { vendorId, type Billing, type ClientDialect } from './types';

// Chat completions (OpenAI): the client dialect, translated from and to the canonical form.

type ChatMessage = ChatRequest['messages'][number];

const FINISH_TO_CHAT: Record<FinishReason, string> = { stop: 'stop', stop_sequence: 'stop', length: 'length', tool_calls: 'tool_calls', content_filter: 'content_filter' };

function parts(content: ChatMessage['content']): Part[] {
  if (content == null) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return content.map((p): Part => {
    const x = p as Record<string, unknown> & { type: string };
    if (x.type === 'text') return { type: 'text', text: String(x.text ?? '') };
    if (x.type === 'image_url') return { type: 'image', url: String((x.image_url as { url?: string } | undefined)?.url ?? '') };
    if (x.type === 'input_audio') {
      const a = x.input_audio as { data?: string; format?: string } | undefined;
      return { type: 'audio', data: String(a?.data ?? ''), format: String(a?.format ?? '') };
    }
    throw new GatewayError('unsupported_parameter', { param: 'messages', detail: `content part type '${x.type}' is not supported` });
  });
}

function toMessage(m: ChatMessage): Message {
  const x = m as ChatMessage & { tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>; tool_call_id?: string };
  switch (m.role) {
    case 'system':
    case 'developer':
      return { role: 'system', text: parts(m.content).map((p) => (p.type === 'text' ? p.text : '')).join('') };
    case 'tool':
    case 'function':
      return { role: 'tool', toolCallId: x.tool_call_id ?? '', content: parts(m.content).map((p) => (p.type === 'text' ? p.text : '')).join('') };
    case 'assistant':
      return { role: 'assistant', parts: parts(m.content), toolCalls: (x.tool_calls ?? []).map((t) => ({ id: t.id, name: t.function?.name, arguments: t.function?.arguments ?? '' })) };
    default:
      return { role: 'user', parts: parts(m.content) };
  }
}

function toCanonical(req: ChatRequest): CanonicalRequest {
  const tc = req.tool_choice as string | { function?: { name?: string } } | undefined;
  const rf = req.response_format as { type: string; json_schema?: { name: string; schema: Record<string, unknown>; strict?: boolean } } | undefined;
  return {
    messages: req.messages.map(toMessage),
    maxTokens: req.max_completion_tokens ?? req.max_tokens ?? null,
    temperature: req.temperature ?? undefined,
    topP: req.top_p ?? undefined,
    stop: req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop,
    tools: (req.tools ?? []).map((t) => {
      const f = (t as { function?: { name: string; description?: string; parameters?: Record<string, unknown> } }).function;
      return { name: f?.name ?? '', description: f?.description, parameters: f?.parameters ?? { type: 'object', properties: {} } };
    }),
    toolChoice: tc === undefined ? undefined : typeof tc === 'string' ? (tc as 'auto' | 'none' | 'required') : { name: tc.function?.name ?? '' },
    reasoningEffort: req.reasoning_effort ?? undefined,
    jsonSchema: rf?.type === 'json_schema' ? rf.json_schema : undefined,
    user: req.user,
    ignored: [],
  };
}

const toolCallsOut = (calls: ToolCall[]) => calls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));

/** Chat usage with credits: the provider's own object when it spoke chat, else rebuilt from tokens. */
function usageOf(b: Billing, native: boolean) {
  if (!b.usage) return undefined;
  if (native) return chatUsage(b.usage.raw, b.hold, b.charge);
  const t = b.usage.tokens;
  const raw: Record<string, unknown> = {
    prompt_tokens: t.prompt_tokens,
    completion_tokens: t.completion_tokens,
    total_tokens: t.prompt_tokens + t.completion_tokens,
    prompt_tokens_details: { cached_tokens: t.cached_tokens, cache_write_tokens: t.cache_write_tokens },
  };
  if (t.reasoning_tokens !== null) raw.completion_tokens_details = { reasoning_tokens: t.reasoning_tokens };
  return chatUsage(raw, b.hold, b.charge);
}

export const chatDialect: ClientDialect<ChatRequest> = {
  name: 'chat',
  endpoint: '/v1/chat/completions',
  schema: chatRequestSchema,
  model: (req) => req.model,
  stream: (req) => req.stream === true,
  maxTokens: (req) => req.max_completion_tokens ?? req.max_tokens ?? null,
  // the field the client used; max_completion_tokens when it sent none (max_tokens is deprecated)
  withMaxTokens: (body, n) => ({ ...body, [body.max_completion_tokens == null && body.max_tokens != null ? 'max_tokens' : 'max_completion_tokens']: n }),
  inspect: inspectChatAudio,
  toCanonical,
  promptTokenBound,
  promptTokenEstimate,

  render(resp, billing, ctx) {
    const message: Record<string, unknown> = { role: 'assistant', content: resp.toolCalls.length && !resp.text ? null : resp.text, refusal: null };
    if (resp.toolCalls.length) message.tool_calls = toolCallsOut(resp.toolCalls);
    const id = vendorId('chatcmpl-', ctx.requestId);
    const body: Record<string, unknown> = {
      id,
      object: 'chat.completion',
      created: ctx.created,
      model: ctx.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: FINISH_TO_CHAT[resp.finish] }],
    };
    const usage = usageOf(billing, false);
    if (usage) body.usage = usage;
    return { id, body };
  },

  renderNative(json, billing) {
    const usage = usageOf(billing, true);
    if (usage) json.usage = usage;
    else delete json.usage;
    return { id: String(json.id ?? ''), body: json };
  },

  streamWriter(write, ctx) {
    const id = vendorId('chatcmpl-', ctx.requestId);
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      ({ id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }) as Record<string, unknown>;
    const send = (c: unknown) => write(`data: ${JSON.stringify(c)}\n\n`);
    let roleSent = false;
    let finish: FinishReason = 'stop';
    // Native pass-through holds the upstream's finish chunk back so usage can ride on it.
    let nativeFinish: Record<string, unknown> | null = null;
    let isNative = false;
    const role = () => {
      if (roleSent) return {};
      roleSent = true;
      return { role: 'assistant' };
    };
    return {
      native(raw, events) {
        isNative = true;
        if (events.some((e) => e.type === 'finish')) {
          try {
            nativeFinish = JSON.parse(raw.replace(/^data: ?/m, ''));
            delete nativeFinish!.usage;
          } catch {
            nativeFinish = null;
          }
          return;
        }
        // The separate usage chunk and [DONE] go out once, at the end.
        if (raw.includes('"choices":[]') || /^data: ?\[DONE\]/m.test(raw)) return;
        write(raw + '\n\n');
      },
      event(e) {
        if (e.type === 'text') send(chunk({ ...role(), content: e.text }));
        else if (e.type === 'tool_call') send(chunk({ ...role(), tool_calls: [{ index: e.index, id: e.id, type: 'function', function: { name: e.name, arguments: '' } }] }));
        else if (e.type === 'tool_args') send(chunk({ tool_calls: [{ index: e.index, function: { arguments: e.fragment } }] }));
        else if (e.type === 'finish') finish = e.reason;
      },
      end(billing) {
        const last = nativeFinish ?? chunk({}, FINISH_TO_CHAT[finish]);
        const usage = usageOf(billing, isNative);
        if (usage) last.usage = usage;
        send(last);
        write('data: [DONE]\n\n');
      },
      fail(e) {
        send(e.toEnvelope());
      },
    };
  },

  errorBody: (e) => e.toEnvelope(),
};
