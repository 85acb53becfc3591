// POST /v1/messages: Anthropic's Messages wire format on the shared plan, as one JSON object
// or as named server-sent events. Errors use Anthropic's `{type:'error', error:{type, message}}`.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseMessagesRequest, type MessagesRequest } from './anthropic-request';
import { reasoningWords, type Plan } from './completion';
import { admit, sendPlain, type Dialect, type Failure } from './endpoint';
import { bearerKey, sendJson } from './http';
import { eventFrame, writeStream, type Frame } from './sse';
import type { SimState } from './state';
import { isRecord } from './text';

const SIGNATURE = 'sim-sig';

function errorType(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

function failMessages(res: ServerResponse, f: Failure): void {
  let type = errorType(f.status);
  let message = f.message;
  if (f.reason === 'simulated' && f.errorCode !== undefined) type = f.errorCode;
  if (f.reason === 'rejected_key') message = 'invalid x-api-key';
  if (f.reason === 'sim_control') message = `invalid_sim_control: ${f.message}`;
  sendJson(res, f.status, { type: 'error', error: { type, message } }, f.headers);
}

/** `x-api-key`, else `Authorization: Bearer`. */
function anthropicKey(req: IncomingMessage): string | null {
  const header = req.headers['x-api-key'];
  const key = (Array.isArray(header) ? header[0] : header)?.trim();
  return key ? key : bearerKey(req);
}

const MESSAGES: Dialect<MessagesRequest> = {
  endpoint: '/v1/messages',
  key: anthropicKey,
  describe: (body) => {
    const stream = isRecord(body) && body.stream === true;
    // Anthropic streams always carry usage.
    return { model: isRecord(body) && typeof body.model === 'string' ? body.model : null, stream, include_usage: stream };
  },
  parse: (body, req) => {
    if (!req.headers['anthropic-version']) {
      return { ok: false, message: 'anthropic-version: header is required', param: 'anthropic-version' };
    }
    return parseMessagesRequest(body);
  },
  fail: failMessages,
};

function randomId(prefix: string): string {
  // Anthropic ids look like msg_01XFDUDYJgAACzvnptvVoYEL: base62-ish, 24 characters.
  return `${prefix}01${randomBytes(18).toString('base64url').replace(/[-_]/g, 'x').slice(0, 22)}`;
}

interface AnthropicUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
  cost?: number;
}

/** input_tokens excludes cache reads and writes (never below 0); output_tokens includes thinking. */
export function anthropicUsage(plan: Plan): AnthropicUsage {
  const { prompt_tokens: prompt, prompt_tokens_details: cache, completion_tokens: output, cost } = plan.usage;
  const usage: AnthropicUsage = {
    input_tokens: Math.max(0, prompt - cache.cached_tokens - cache.cache_write_tokens),
    cache_creation_input_tokens: cache.cache_write_tokens,
    cache_read_input_tokens: cache.cached_tokens,
    output_tokens: output,
  };
  if (cost !== undefined) usage.cost = cost;
  return usage;
}

function stopReason(plan: Plan): string {
  if (plan.finishReason === 'tool_calls') return 'tool_use';
  if (plan.stopSequence !== null) return 'stop_sequence';
  return plan.finishReason === 'length' ? 'max_tokens' : 'end_turn';
}

export async function serveMessages(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const admitted = await admit(req, res, state, MESSAGES);
  if (!admitted) return;
  const { request, behaviour, plan } = admitted;
  const thinking = plan.reasoningTokens > 0 ? reasoningWords(request, plan.reasoningTokens) : null;
  const toolId = randomId('toolu_');
  const message = {
    id: randomId('msg_'),
    type: 'message',
    role: 'assistant',
    model: request.model,
  };
  if (request.stream) {
    await writeStream(res, messageFrames(message, plan, thinking, toolId, !behaviour.no_usage), {
      delay: behaviour.chunk_delay ?? 0,
      dropAfter: behaviour.drop_after,
      countedTotal: plan.toolCall ? plan.toolCall.fragments.length : plan.pieces.length,
    });
    return;
  }
  const content: object[] = [];
  if (thinking) content.push({ type: 'thinking', thinking: thinking.join(' '), signature: SIGNATURE });
  if (plan.toolCall) {
    content.push({ type: 'tool_use', id: toolId, name: plan.toolCall.name, input: JSON.parse(plan.toolCall.arguments) as unknown });
  } else {
    content.push({ type: 'text', text: plan.pieces.join(' ') });
  }
  sendPlain(res, behaviour, () =>
    sendJson(res, 200, {
      ...message,
      content,
      stop_reason: stopReason(plan),
      stop_sequence: plan.stopSequence,
      ...(behaviour.no_usage ? {} : { usage: anthropicUsage(plan) }),
    }),
  );
}

/**
 * message_start, ping, then per content block start / deltas / stop (thinking, then text or
 * tool_use), message_delta with the stop reason and the output token total, message_stop.
 */
function* messageFrames(message: object, plan: Plan, thinking: string[] | null, toolId: string, withUsage: boolean): Generator<Frame> {
  const usage = anthropicUsage(plan);
  const { output_tokens: outputTokens, cost, ...inputUsage } = usage;
  yield eventFrame('message_start', {
    type: 'message_start',
    message: {
      ...message,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      ...(withUsage ? { usage: { ...inputUsage, output_tokens: 1 } } : {}),
    },
  });
  yield eventFrame('ping', { type: 'ping' });

  let index = 0;
  const delta = (value: object, counted = false): Frame =>
    eventFrame('content_block_delta', { type: 'content_block_delta', index, delta: value }, counted);
  const start = (block: object): Frame => eventFrame('content_block_start', { type: 'content_block_start', index, content_block: block });
  const stop = (): Frame => eventFrame('content_block_stop', { type: 'content_block_stop', index });

  if (thinking) {
    yield start({ type: 'thinking', thinking: '', signature: '' });
    for (let i = 0; i < thinking.length; i++) yield delta({ type: 'thinking_delta', thinking: i === 0 ? thinking[i] : ` ${thinking[i]}` });
    yield delta({ type: 'signature_delta', signature: SIGNATURE });
    yield stop();
    index += 1;
  }
  if (plan.toolCall) {
    yield start({ type: 'tool_use', id: toolId, name: plan.toolCall.name, input: {} });
    for (const fragment of plan.toolCall.fragments) yield delta({ type: 'input_json_delta', partial_json: fragment }, true);
  } else {
    yield start({ type: 'text', text: '' });
    for (let i = 0; i < plan.pieces.length; i++) yield delta({ type: 'text_delta', text: i === 0 ? plan.pieces[i] : ` ${plan.pieces[i]}` }, true);
  }
  yield stop();

  yield eventFrame('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: stopReason(plan), stop_sequence: plan.stopSequence },
    ...(withUsage ? { usage: { output_tokens: outputTokens, ...(cost !== undefined ? { cost } : {}) } } : {}),
  });
  yield eventFrame('message_stop', { type: 'message_stop' });
}
