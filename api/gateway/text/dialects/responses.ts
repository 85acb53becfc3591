import { GatewayError } from '../../../../domain/shared/errors';
import type { CanonicalRequest, CanonicalResponse, Message, Part, Tool, ToolCall, ToolChoice } from '../../../../providers/canonical';
import { responsesRequestSchema, type ResponsesContentPart, type ResponsesItem, type ResponsesRequest, type ResponsesToolChoice } from '../responses-schema';
import { NO_AUDIO, vendorId, type Billing, type ClientDialect, type RenderContext } from './types';

// Responses (OpenAI): the client dialect, translated to and from the canonical form (no upstream speaks
// it natively). One dialect object per request (`responsesDialect()`): the tools the request declared
// (namespace members, custom and local-shell tools, all plain functions upstream) decide how the
// upstream's tool calls are shown back. What no route can carry is listed in `ignored` (docs/gateway.md).

/** How the client declared a tool the upstream sees as a plain function. */
interface Declared {
  kind: 'function' | 'custom' | 'local_shell';
  name: string;
  namespace?: string;
}

/** The upstream's name for a namespace member: Codex's own flat form when the namespace ends in `_` or `-`. */
const flatName = (namespace: string | null | undefined, name: string) => (!namespace ? name : /[_-]$/.test(namespace) ? namespace + name : `${namespace}__${name}`);

const LOCAL_SHELL: Tool = {
  name: 'local_shell',
  description: 'Runs a command on the user’s machine and returns its output.',
  parameters: {
    type: 'object',
    properties: {
      command: { type: 'array', items: { type: 'string' }, description: 'the program and its arguments' },
      working_directory: { type: 'string' },
      timeout_ms: { type: 'integer' },
      env: { type: 'object', additionalProperties: { type: 'string' } },
    },
    required: ['command'],
  },
};

/** A custom (free-form) tool as a function taking its raw input as one string. */
function customAsFunction(name: string, description: string | null | undefined, format: Record<string, unknown> | null | undefined): Tool {
  const grammar = format?.type === 'grammar' ? ` It must follow this ${String(format.syntax)} grammar:\n${String(format.definition)}` : '';
  return {
    name,
    description: description ?? undefined,
    parameters: {
      type: 'object',
      properties: { input: { type: 'string', description: `The tool's raw input as free text (not JSON).${grammar}` } },
      required: ['input'],
      additionalProperties: false,
    },
  };
}

/** Names this translation could not carry, each once, in the order met. */
class Ignored {
  readonly list: string[] = [];
  add(name: string) {
    if (!this.list.includes(name)) this.list.push(name);
  }
}

function parts(content: string | ResponsesContentPart[], ignored: Ignored): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Part[] = [];
  for (const p of content) {
    if (p.type === 'input_text' || p.type === 'output_text') out.push({ type: 'text', text: p.text });
    else if (p.type === 'refusal') out.push({ type: 'text', text: p.refusal });
    else if (p.type === 'input_audio') throw new GatewayError('unsupported_parameter', { param: 'input', detail: 'audio input is served by /v1/chat/completions only' });
    else if (p.type === 'input_image' && p.image_url) out.push({ type: 'image', url: p.image_url });
    else ignored.add(`input;content=${p.type === 'input_image' ? 'input_image.file_id' : p.type}`); // nothing stored here to read files from
  }
  return out;
}

const textOf = (ps: Part[]) => ps.map((p) => (p.type === 'text' ? p.text : '')).join('');

function toMessages(items: ResponsesItem[], ignored: Ignored): Message[] {
  const out: Message[] = [];
  const call = (c: ToolCall) => {
    const last = out.at(-1);
    if (last?.role === 'assistant') last.toolCalls.push(c);
    else out.push({ role: 'assistant', parts: [], toolCalls: [c] });
  };
  for (const it of items) {
    switch (it.type) {
      case 'message':
        if (it.role === 'system' || it.role === 'developer') out.push({ role: 'system', text: textOf(parts(it.content, ignored)) });
        else if (it.role === 'assistant') out.push({ role: 'assistant', parts: parts(it.content, ignored), toolCalls: [] });
        else out.push({ role: 'user', parts: parts(it.content, ignored) });
        break;
      case 'function_call':
        call({ id: it.call_id, name: flatName(it.namespace, it.name), arguments: it.arguments });
        break;
      case 'custom_tool_call':
        call({ id: it.call_id, name: flatName(it.namespace, it.name), arguments: JSON.stringify({ input: it.input }) });
        break;
      case 'local_shell_call': {
        const { type: _exec, ...action } = it.action;
        call({ id: it.call_id, name: LOCAL_SHELL.name, arguments: JSON.stringify(action) });
        break;
      }
      case 'function_call_output':
        out.push({ role: 'tool', toolCallId: it.call_id ?? it.id ?? '', content: typeof it.output === 'string' ? it.output : textOf(parts(it.output, ignored)) });
        break;
      case 'custom_tool_call_output':
        out.push({ role: 'tool', toolCallId: it.call_id, content: typeof it.output === 'string' ? it.output : textOf(parts(it.output, ignored)) });
        break;
      case 'local_shell_call_output':
        out.push({ role: 'tool', toolCallId: it.id, content: it.output });
        break;
      case 'reasoning':
        break; // the upstream's own (or another's encrypted) reasoning: each upstream reasons afresh
      default:
        ignored.add(`input;type=${it.type}`);
    }
  }
  return out;
}

function toolChoice(tc: ResponsesToolChoice | undefined, ignored: Ignored): ToolChoice | undefined {
  if (tc === undefined || typeof tc === 'string') return tc;
  if (tc.type === 'function' || tc.type === 'custom') return { name: tc.name };
  ignored.add(`tool_choice;type=${tc.type}`);
  return tc.type === 'allowed_tools' ? tc.mode : 'auto';
}

/** Top-level fields no route carries (the canonical form has no place for them), listed when they ask for something. */
const UNCARRIED = ['metadata', 'client_metadata', 'safety_identifier', 'prompt_cache_key', 'prompt_cache_retention', 'prompt_cache_options', 'max_tool_calls', 'top_logprobs', 'context_management', 'moderation', 'access_programs', 'image', 'stream_options'] as const;

function translate(req: ResponsesRequest): { canonical: CanonicalRequest; declared: Map<string, Declared> } {
  const ignored = new Ignored();
  const declared = new Map<string, Declared>();
  const tools: Tool[] = [];
  const declare = (t: { type: 'function' | 'custom'; name: string; description?: string | null; parameters?: Record<string, unknown> | null; format?: Record<string, unknown> | null }, namespace?: string) => {
    const name = flatName(namespace, t.name);
    declared.set(name, { kind: t.type, name: t.name, ...(namespace ? { namespace } : {}) });
    tools.push(t.type === 'custom' ? customAsFunction(name, t.description, t.format) : { name, description: t.description ?? undefined, parameters: t.parameters ?? { type: 'object', properties: {} } });
  };
  for (const t of req.tools ?? []) {
    if (t.type === 'function' || t.type === 'custom') declare(t);
    else if (t.type === 'namespace') for (const m of t.tools) declare(m, t.name);
    else if (t.type === 'local_shell') {
      declared.set(LOCAL_SHELL.name, { kind: 'local_shell', name: LOCAL_SHELL.name });
      tools.push(LOCAL_SHELL);
    } else ignored.add(`tools;type=${t.type}`);
  }
  const items: ResponsesItem[] = typeof req.input === 'string' ? [{ type: 'message', role: 'user', content: req.input }] : req.input;
  const messages = [...(req.instructions ? [{ role: 'system' as const, text: req.instructions }] : []), ...toMessages(items, ignored)];
  let choice = toolChoice(req.tool_choice, ignored);
  if (choice !== undefined && choice !== 'none' && choice !== 'auto' && !tools.length) {
    ignored.add('tool_choice'); // every tool it could name was dropped
    choice = undefined;
  }
  const format = req.text?.format as { type: string; name?: string; schema?: Record<string, unknown>; strict?: boolean } | undefined;
  if (format?.type === 'json_object') ignored.add('text.format;type=json_object');
  if (req.text?.verbosity) ignored.add('text.verbosity');
  if (req.reasoning?.context) ignored.add('reasoning.context');
  if (req.reasoning?.mode) ignored.add('reasoning.mode');
  if (req.parallel_tool_calls === false) ignored.add('parallel_tool_calls');
  if (req.include?.includes('message.output_text.logprobs')) ignored.add('include;value=message.output_text.logprobs');
  for (const name of UNCARRIED) if (req[name] != null) ignored.add(name);
  if (req.service_tier != null && req.service_tier !== 'auto' && req.service_tier !== 'default') ignored.add('service_tier');
  if (req.store === true) ignored.add('store'); // nothing is stored here
  if (req.background === true) ignored.add('background'); // answered in the foreground
  if (req.background_options != null) ignored.add('background_options'); // no background window, so no discount either
  if (req.truncation === 'auto') ignored.add('truncation');
  const canonical: CanonicalRequest = {
    messages,
    maxTokens: req.max_output_tokens ?? null,
    temperature: req.temperature ?? undefined,
    topP: req.top_p ?? undefined,
    stop: [],
    tools,
    toolChoice: choice,
    reasoningEffort: req.reasoning?.effort ?? undefined,
    jsonSchema: format?.type === 'json_schema' && format.schema ? { name: format.name ?? 'output', schema: format.schema, strict: format.strict } : undefined,
    user: req.user,
    ignored: ignored.list,
  };
  return { canonical, declared };
}

/**
 * Conversation state stored at OpenAI (an earlier response, a conversation, a prompt template) is
 * refused as OpenAI refuses an id it does not know: nothing is stored here, so no id is known.
 */
function refuseStoredState(req: ResponsesRequest) {
  const stored: Array<[string, string | null | undefined]> = [
    ['previous_response_id', req.previous_response_id],
    ['conversation', typeof req.conversation === 'string' ? req.conversation : req.conversation?.id],
    ['prompt', req.prompt?.id],
  ];
  for (const [param, id] of stored) {
    if (id != null) throw new GatewayError('invalid_parameter', { param, detail: `'${id}' not found: the gateway stores no responses, conversations or prompts; send the whole conversation in input (and instructions)` });
  }
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

const parseJson = (s: string): Record<string, unknown> => {
  try {
    const v: unknown = JSON.parse(s);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
};

export function responsesDialect(): ClientDialect<ResponsesRequest> {
  // Set by toCanonical, which runs before any answer is rendered (every route is translated).
  let request: ResponsesRequest | null = null;
  let declared = new Map<string, Declared>();

  /** The response object around its output items, echoing the request's settings as OpenAI does. */
  const responseObject = (ctx: RenderContext, status: string, output: unknown[], usage: unknown, incomplete: boolean) => ({
    id: vendorId('resp_', ctx.requestId),
    object: 'response',
    created_at: ctx.created,
    status,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: request?.instructions ?? null,
    max_output_tokens: request?.max_output_tokens ?? null,
    metadata: request?.metadata ?? {},
    model: ctx.model,
    output,
    parallel_tool_calls: request?.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: request?.reasoning?.effort ?? null, summary: request?.reasoning?.summary ?? null },
    store: false,
    temperature: request?.temperature ?? 1,
    text: { format: request?.text?.format ?? { type: 'text' }, verbosity: request?.text?.verbosity ?? 'medium' },
    tool_choice: request?.tool_choice ?? 'auto',
    tools: request?.tools ?? [],
    top_p: request?.top_p ?? 1,
    truncation: request?.truncation ?? 'disabled',
    usage,
  });

  const messageItem = (ctx: RenderContext, t: string, status = 'completed') => ({
    type: 'message',
    id: vendorId('msg_', ctx.requestId),
    status,
    role: 'assistant',
    content: t === '' && status !== 'completed' ? [] : [{ type: 'output_text', text: t, annotations: [] }],
  });
  const reasoningItem = (ctx: RenderContext, t: string) => ({ type: 'reasoning', id: vendorId('rs_', ctx.requestId), summary: [{ type: 'summary_text', text: t }] });
  const itemId = (c: ToolCall, i: number) => {
    const kind = declared.get(c.name)?.kind;
    return kind === 'local_shell' ? c.id : `${kind === 'custom' ? 'ctc' : 'fc'}_${i}_${c.id}`;
  };
  /** A tool call as the item of the tool's own kind, under the client's name and namespace. */
  const callItem = (c: ToolCall, i: number, status = 'completed') => {
    const d = declared.get(c.name);
    const ns = d?.namespace ? { namespace: d.namespace } : {};
    const id = itemId(c, i);
    if (d?.kind === 'custom') {
      const input = status === 'completed' ? parseJson(c.arguments).input : '';
      return { type: 'custom_tool_call' as const, id, call_id: c.id, name: d.name, ...ns, input: typeof input === 'string' ? input : c.arguments };
    }
    if (d?.kind === 'local_shell') {
      const a = parseJson(c.arguments);
      const command = Array.isArray(a.command) ? a.command.map(String) : [];
      return { type: 'local_shell_call' as const, id, call_id: c.id, status, action: { type: 'exec', command, env: a.env ?? {}, timeout_ms: a.timeout_ms ?? null, working_directory: a.working_directory ?? null, user: null } };
    }
    return { type: 'function_call' as const, id, call_id: c.id, name: d?.name ?? c.name, ...ns, arguments: c.arguments, status };
  };

  return {
    name: 'responses',
    endpoint: '/v1/responses',
    schema: responsesRequestSchema,
    model: (req) => req.model,
    stream: (req) => req.stream === true,
    maxTokens: (req) => req.max_output_tokens ?? null,
    withMaxTokens: (body, n) => ({ ...body, max_output_tokens: n }),
    inspect: async (req) => {
      refuseStoredState(req);
      return NO_AUDIO;
    },
    toCanonical(req) {
      const t = translate(req);
      request = req;
      declared = t.declared;
      return t.canonical;
    },
    promptTokenBound: (req) => Buffer.byteLength(JSON.stringify([req.instructions ?? '', req.input, req.tools ?? []])) + 2000 * JSON.stringify(req.input).split('"input_image"').length,
    promptTokenEstimate: (req) => Math.ceil(JSON.stringify([req.instructions ?? '', req.input]).length / 4),

    render(resp: CanonicalResponse, billing, ctx) {
      const output: unknown[] = [];
      if (resp.reasoning) output.push(reasoningItem(ctx, resp.reasoning));
      if (resp.text || !resp.toolCalls.length) output.push(messageItem(ctx, resp.text));
      resp.toolCalls.forEach((c, i) => output.push(callItem(c, i)));
      const incomplete = resp.finish === 'length';
      const body = responseObject(ctx, incomplete ? 'incomplete' : 'completed', output, usageOf(billing), incomplete);
      return { id: body.id, body };
    },

    // No upstream speaks responses natively; a native answer would be passed on as it came.
    renderNative: (json) => ({ id: String(json.id ?? ''), body: json }),

    streamWriter(write, ctx) {
      let seq = 0;
      const send = (type: string, data: Record<string, unknown>) => write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
      const msgId = vendorId('msg_', ctx.requestId);
      const rsId = vendorId('rs_', ctx.requestId);
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
      return {
        native(raw) {
          write(raw + '\n\n');
        },
        event(e) {
          start();
          if (e.type === 'reasoning') {
            if (reasoningIndex === null) {
              reasoningIndex = nextIndex++;
              send('response.output_item.added', { output_index: reasoningIndex, item: { ...reasoningItem(ctx, ''), summary: [] } });
              send('response.reasoning_summary_part.added', { item_id: rsId, output_index: reasoningIndex, summary_index: 0, part: { type: 'summary_text', text: '' } });
            }
            reasoning += e.text;
            send('response.reasoning_summary_text.delta', { item_id: rsId, output_index: reasoningIndex, summary_index: 0, delta: e.text });
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
            // custom and local-shell calls show their input once complete (upstream it is JSON around it)
            if (!declared.get(c.call.name) || declared.get(c.call.name)?.kind === 'function') {
              send('response.function_call_arguments.delta', { item_id: itemId(c.call, e.index), output_index: c.outputIndex, delta: e.fragment });
            }
          } else if (e.type === 'finish') {
            finish = e.reason;
          }
        },
        end(billing) {
          start();
          const output: Array<{ index: number; item: unknown }> = [];
          if (reasoningIndex !== null) {
            const item = reasoningItem(ctx, reasoning);
            send('response.reasoning_summary_text.done', { item_id: rsId, output_index: reasoningIndex, summary_index: 0, text: reasoning });
            send('response.reasoning_summary_part.done', { item_id: rsId, output_index: reasoningIndex, summary_index: 0, part: item.summary[0] });
            send('response.output_item.done', { output_index: reasoningIndex, item });
            output.push({ index: reasoningIndex, item });
          }
          if (textIndex !== null) {
            const part = { type: 'output_text', text: textBuf, annotations: [] };
            send('response.output_text.done', { item_id: msgId, output_index: textIndex, content_index: 0, text: textBuf, logprobs: [] });
            send('response.content_part.done', { item_id: msgId, output_index: textIndex, content_index: 0, part });
            const item = messageItem(ctx, textBuf);
            send('response.output_item.done', { output_index: textIndex, item });
            output.push({ index: textIndex, item });
          }
          for (const [i, c] of calls) {
            const item = callItem(c.call, i);
            const base = { item_id: item.id, output_index: c.outputIndex };
            if (item.type === 'function_call') send('response.function_call_arguments.done', { ...base, arguments: c.call.arguments });
            else if (item.type === 'custom_tool_call') {
              send('response.custom_tool_call_input.delta', { ...base, delta: item.input });
              send('response.custom_tool_call_input.done', { ...base, input: item.input });
            }
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
}
