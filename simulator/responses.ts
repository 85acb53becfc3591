// POST /v1/responses: OpenAI's Responses wire format on the shared plan, as one response
// object or as typed server-sent events with sequence numbers (no `[DONE]` line).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { reasoningWords, type Plan } from './completion';
import { admit, sendPlain, type Dialect } from './endpoint';
import { bearerKey, sendError, sendJson } from './http';
import { parseResponsesRequest, type ResponsesRequest } from './responses-request';
import { eventFrame, writeStream, type Frame } from './sse';
import type { SimState } from './state';
import { isRecord } from './text';

const RESPONSES: Dialect<ResponsesRequest> = {
  endpoint: '/v1/responses',
  key: bearerKey,
  describe: (body) => {
    const stream = isRecord(body) && body.stream === true;
    // Responses streams always carry usage.
    return { model: isRecord(body) && typeof body.model === 'string' ? body.model : null, stream, include_usage: stream };
  },
  parse: parseResponsesRequest,
  fail: (res, f) => sendError(res, f.status, f.message, { code: f.code, param: f.param, headers: f.headers }),
};

function randomId(prefix: string): string {
  return `${prefix}${randomBytes(24).toString('hex')}`;
}

interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
  cost?: number;
}

/** input_tokens includes cached tokens (like chat prompt_tokens); there is no cache-write field. */
export function responsesUsage(plan: Plan): ResponsesUsage {
  const u = plan.usage;
  const usage: ResponsesUsage = {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.prompt_tokens_details.cached_tokens },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: plan.reasoningTokens },
    total_tokens: u.total_tokens,
  };
  if (u.cost !== undefined) usage.cost = u.cost;
  return usage;
}

/** The output items of the finished response, built from the plan. */
interface Items {
  reasoning: { id: string; text: string } | null;
  message: { id: string; text: string } | null;
  call: { id: string; call_id: string; name: string; arguments: string } | null;
  incomplete: boolean;
}

function planItems(request: ResponsesRequest, plan: Plan): Items {
  return {
    reasoning: plan.reasoningTokens > 0 ? { id: randomId('rs_'), text: reasoningWords(request, plan.reasoningTokens).join(' ') } : null,
    message: plan.toolCall ? null : { id: randomId('msg_'), text: plan.pieces.join(' ') },
    call: plan.toolCall
      ? { id: randomId('fc_'), call_id: `call_${randomBytes(12).toString('hex')}`, name: plan.toolCall.name, arguments: plan.toolCall.arguments }
      : null,
    incomplete: plan.finishReason === 'length',
  };
}

const reasoningItem = (r: { id: string }, summary: string | null) => ({
  type: 'reasoning',
  id: r.id,
  summary: summary === null ? [] : [{ type: 'summary_text', text: summary }],
});
const outputText = (text: string) => ({ type: 'output_text', text, annotations: [] });
const messageItem = (m: { id: string }, status: string, text: string | null) => ({
  type: 'message',
  id: m.id,
  status,
  role: 'assistant',
  content: text === null ? [] : [outputText(text)],
});
const callItem = (c: NonNullable<Items['call']>, status: string, args: string) => ({ type: 'function_call', ...c, arguments: args, status });

function finalOutput(items: Items): object[] {
  const output: object[] = [];
  if (items.reasoning) output.push(reasoningItem(items.reasoning, items.reasoning.text));
  if (items.message) output.push(messageItem(items.message, items.incomplete ? 'incomplete' : 'completed', items.message.text));
  if (items.call) output.push(callItem(items.call, 'completed', items.call.arguments));
  return output;
}

/** The response object; `items` null for the in-progress snapshot the stream starts with. */
function responseObject(head: { id: string; created_at: number }, request: ResponsesRequest, items: Items | null, usage: ResponsesUsage | null): object {
  const status = items === null ? 'in_progress' : items.incomplete ? 'incomplete' : 'completed';
  return {
    id: head.id,
    object: 'response',
    created_at: head.created_at,
    status,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    model: request.model,
    output: items === null ? [] : finalOutput(items),
    parallel_tool_calls: true,
    truncation: 'disabled',
    user: null,
    ...request.echo,
    usage,
  };
}

export async function serveResponses(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const admitted = await admit(req, res, state, RESPONSES);
  if (!admitted) return;
  const { request, behaviour, plan } = admitted;
  const head = { id: randomId('resp_'), created_at: Math.floor(Date.now() / 1000) };
  const items = planItems(request, plan);
  const usage = behaviour.no_usage ? null : responsesUsage(plan);
  if (request.stream) {
    await writeStream(res, responseFrames(head, request, plan, items, usage), {
      delay: behaviour.chunk_delay ?? 0,
      dropAfter: behaviour.drop_after,
      countedTotal: plan.toolCall ? plan.toolCall.fragments.length : plan.pieces.length,
    });
    return;
  }
  sendPlain(res, behaviour, () => sendJson(res, 200, responseObject(head, request, items, usage)));
}

/** Words streamed as deltas: the first bare, the rest with a leading space. */
function* spaced(words: readonly string[]): Generator<string> {
  for (let i = 0; i < words.length; i++) yield i === 0 ? (words[i] ?? '') : ` ${words[i] ?? ''}`;
}

/**
 * response.created, response.in_progress, then per output item: output_item.added, its parts
 * and deltas, output_item.done; finally response.completed (response.incomplete when
 * max_output_tokens cut the text) holding the final object with usage.
 */
function* responseFrames(
  head: { id: string; created_at: number },
  request: ResponsesRequest,
  plan: Plan,
  items: Items,
  usage: ResponsesUsage | null,
): Generator<Frame> {
  let seq = 0;
  const ev = (type: string, fields: object, counted = false): Frame => eventFrame(type, { type, sequence_number: seq++, ...fields }, counted);
  const snapshot = responseObject(head, request, null, null);
  yield ev('response.created', { response: snapshot });
  yield ev('response.in_progress', { response: snapshot });

  let outputIndex = 0;
  if (items.reasoning) {
    const r = items.reasoning;
    const at = { item_id: r.id, output_index: outputIndex, summary_index: 0 };
    yield ev('response.output_item.added', { output_index: outputIndex, item: reasoningItem(r, null) });
    yield ev('response.reasoning_summary_part.added', { ...at, part: { type: 'summary_text', text: '' } });
    for (const delta of spaced(reasoningWords(request, plan.reasoningTokens))) yield ev('response.reasoning_summary_text.delta', { ...at, delta });
    yield ev('response.reasoning_summary_text.done', { ...at, text: r.text });
    yield ev('response.reasoning_summary_part.done', { ...at, part: { type: 'summary_text', text: r.text } });
    yield ev('response.output_item.done', { output_index: outputIndex, item: reasoningItem(r, r.text) });
    outputIndex += 1;
  }
  if (items.message) {
    const m = items.message;
    const at = { item_id: m.id, output_index: outputIndex, content_index: 0 };
    yield ev('response.output_item.added', { output_index: outputIndex, item: messageItem(m, 'in_progress', null) });
    yield ev('response.content_part.added', { ...at, part: outputText('') });
    for (const delta of spaced(plan.pieces)) yield ev('response.output_text.delta', { ...at, delta }, true);
    yield ev('response.output_text.done', { ...at, text: m.text });
    yield ev('response.content_part.done', { ...at, part: outputText(m.text) });
    yield ev('response.output_item.done', {
      output_index: outputIndex,
      item: messageItem(m, items.incomplete ? 'incomplete' : 'completed', m.text),
    });
  }
  if (items.call && plan.toolCall) {
    const c = items.call;
    const at = { item_id: c.id, output_index: outputIndex };
    yield ev('response.output_item.added', { output_index: outputIndex, item: callItem(c, 'in_progress', '') });
    for (const delta of plan.toolCall.fragments) yield ev('response.function_call_arguments.delta', { ...at, delta }, true);
    yield ev('response.function_call_arguments.done', { ...at, arguments: c.arguments });
    yield ev('response.output_item.done', { output_index: outputIndex, item: callItem(c, 'completed', c.arguments) });
  }
  const final = responseObject(head, request, items, usage);
  yield ev(items.incomplete ? 'response.incomplete' : 'response.completed', { response: final });
}
