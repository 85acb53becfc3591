import type { CanonicalRequest, FinishReason, Message, Part, Tool, ToolCall, ToolChoice } from '../../../../providers/canonical';
import { chatRequestSchema, promptTokenBound, promptTokenEstimate, type ChatRequest } from '../chat-schema';
import { chatUsage } from '../../shared/usage-view';
import { inspectChatAudio } from './chat-audio';
import { vendorId, type Billing, type ClientDialect } from './types';

// Chat completions (OpenAI): the client dialect, translated from and to the canonical form.

type ChatMessage = ChatRequest['messages'][number];

const FINISH_TO_CHAT: Record<FinishReason, string> = { stop: 'stop', stop_sequence: 'stop', length: 'length', tool_calls: 'tool_calls', content_filter: 'content_filter' };

/** Names this translation could not carry, each once. */
type Ignore = (name: string) => void;

function parts(content: ChatMessage['content'], ignore: Ignore): Part[] {
  if (content == null) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Part[] = [];
  for (const p of content) {
    const x = p as Record<string, unknown> & { type: string };
    if (x.type === 'text') out.push({ type: 'text', text: String(x.text ?? '') });
    else if (x.type === 'refusal') out.push({ type: 'text', text: String(x.refusal ?? '') });
    else if (x.type === 'image_url') out.push({ type: 'image', url: String((x.image_url as { url?: string } | undefined)?.url ?? '') });
    else if (x.type === 'input_audio') {
      const a = x.input_audio as { data?: string; format?: string } | undefined;
      out.push({ type: 'audio', data: String(a?.data ?? ''), format: String(a?.format ?? '') });
    } else ignore(`messages;content=${x.type}`); // files: the canonical form carries none
  }
  return out;
}

const textOf = (ps: Part[]) => ps.map((p) => (p.type === 'text' ? p.text : '')).join('');

function toMessages(messages: ChatMessage[], ignore: Ignore): Message[] {
  // Deprecated function calling names no call ids: each call gets one, its result the latest.
  let functionCalls = 0;
  return messages.map((m): Message => {
    const x = m as ChatMessage & { tool_calls?: Array<{ id: string; type?: string; function?: { name: string; arguments: string } }>; tool_call_id?: string; function_call?: { name: string; arguments: string } | null };
    switch (m.role) {
      case 'system':
      case 'developer':
        return { role: 'system', text: textOf(parts(m.content, ignore)) };
      case 'tool':
        return { role: 'tool', toolCallId: x.tool_call_id ?? '', content: textOf(parts(m.content, ignore)) };
      case 'function':
        return { role: 'tool', toolCallId: `function_call_${functionCalls}`, content: textOf(parts(m.content, ignore)) };
      case 'assistant': {
        const calls: ToolCall[] = [];
        for (const t of x.tool_calls ?? []) {
          if (t.function) calls.push({ id: t.id, name: t.function.name, arguments: t.function.arguments ?? '' });
          else ignore(`messages;tool_calls=${t.type}`);
        }
        if (x.function_call) calls.push({ id: `function_call_${++functionCalls}`, name: x.function_call.name, arguments: x.function_call.arguments ?? '' });
        return { role: 'assistant', parts: parts(m.content, ignore), toolCalls: calls };
      }
      default:
        return { role: 'user', parts: parts(m.content, ignore) };
    }
  });
}

/** Tool choice: the tools form, or the deprecated function_call one. */
function toolChoice(req: ChatRequest, ignore: Ignore): ToolChoice | undefined {
  const fc = req.function_call;
  if (req.tool_choice === undefined && fc !== undefined) return typeof fc === 'string' ? fc : { name: fc.name };
  const tc = req.tool_choice;
  if (tc === undefined || typeof tc === 'string') return tc;
  if (tc.type === 'function') return { name: tc.function.name };
  ignore(`tool_choice;type=${tc.type}`);
  return tc.type === 'allowed_tools' ? tc.allowed_tools.mode : 'auto';
}

/** Top-level fields the canonical form has no place for, listed when they ask for something. */
const UNCARRIED = ['presence_penalty', 'frequency_penalty', 'logit_bias', 'top_logprobs', 'seed', 'metadata', 'prompt_cache_key', 'prompt_cache_retention', 'prompt_cache_options', 'safety_identifier', 'verbosity', 'prediction', 'web_search_options', 'moderation'] as const;

function toCanonical(req: ChatRequest): CanonicalRequest {
  const ignored: string[] = [];
  const ignore: Ignore = (name) => {
    if (!ignored.includes(name)) ignored.push(name);
  };
  const rf = req.response_format as { type: string; json_schema?: { name: string; schema: Record<string, unknown>; strict?: boolean } } | undefined;
  const tools: Tool[] = [];
  for (const t of req.tools ?? []) {
    if (t.type === 'function') {
      const f = t.function as { name: string; description?: string; parameters?: Record<string, unknown> };
      tools.push({ name: f.name, description: f.description, parameters: f.parameters ?? { type: 'object', properties: {} } });
    } else ignore(`tools;type=${t.type}`); // free-form (custom) tools: answered as tool_calls of type function, which a client of them would not read
  }
  for (const f of req.functions ?? []) tools.push({ name: f.name, description: f.description as string | undefined, parameters: (f.parameters as Record<string, unknown> | undefined) ?? { type: 'object', properties: {} } });
  for (const name of UNCARRIED) if (req[name] != null) ignore(name);
  if (req.logprobs) ignore('logprobs');
  if ((req.n ?? 1) > 1) ignore('n');
  if (req.store) ignore('store');
  if (req.parallel_tool_calls === false) ignore('parallel_tool_calls');
  if (req.service_tier != null && req.service_tier !== 'auto' && req.service_tier !== 'default') ignore('service_tier');
  if (rf?.type === 'json_object') ignore('response_format;type=json_object');
  const messages = toMessages(req.messages, ignore);
  return {
    messages,
    maxTokens: req.max_completion_tokens ?? req.max_tokens ?? null,
    temperature: req.temperature ?? undefined,
    topP: req.top_p ?? undefined,
    stop: req.stop == null ? [] : typeof req.stop === 'string' ? [req.stop] : req.stop,
    tools,
    toolChoice: toolChoice(req, ignore),
    reasoningEffort: req.reasoning_effort ?? undefined,
    jsonSchema: rf?.type === 'json_schema' ? rf.json_schema : undefined,
    user: req.user,
    ignored,
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
          if (nativeFinish) send(nativeFinish); // n > 1: only the last finish chunk carries usage
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
