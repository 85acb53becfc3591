// POST /v1/chat/completions: applies the behaviour controls, then answers in OpenAI's
// wire format, either as one JSON object or as server-sent events.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mergeBehaviour, parseDirectives, parseHeader, type Behaviour } from './behaviour';
import { describeBody, parseChatRequest, planCompletion, type ChatRequest, type Plan } from './completion';
import { bearerKey, drained, pause, readBody, sendError, sendJson } from './http';
import type { SimState } from './state';

const DEFAULT_ERROR_CODES: Record<number, string> = {
  401: 'invalid_api_key',
  429: 'rate_limit_exceeded',
  500: 'server_error',
  503: 'service_unavailable',
};

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(',') : value;
}

/** Server defaults < message directive < request header. */
function resolveBehaviour(req: IncomingMessage, request: ChatRequest, state: SimState): Behaviour | string {
  const directive = parseDirectives(request.allText);
  if (!directive.ok) return directive.error;
  const header = parseHeader(headerValue(req.headers['x-sim-behaviour']));
  if (!header.ok) return header.error;
  return mergeBehaviour(state.defaults.forModel(request.model), directive.behaviour, header.behaviour);
}

export async function serveChat(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const read = await readBody(req);
  if (!read.ok) {
    sendError(res, 413, 'Request body exceeds 32 MB.', { headers: { connection: 'close' } });
    return;
  }
  const key = bearerKey(req);
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    state.stats.record({ model: null, stream: false, include_usage: false, key, body: null });
    sendError(res, 400, 'We could not parse the JSON body of your request.', { param: 'body' });
    return;
  }
  state.stats.record({ ...describeBody(body), key, body });

  const parsed = parseChatRequest(body);
  if (!parsed.ok) {
    sendError(res, 400, parsed.message, { param: parsed.param });
    return;
  }
  const request = parsed.request;
  const behaviour = resolveBehaviour(req, request, state);
  if (typeof behaviour === 'string') {
    sendError(res, 400, behaviour, { code: 'invalid_sim_control' });
    return;
  }

  if (key !== null && behaviour.reject_keys?.includes(key)) {
    sendError(res, 401, 'Incorrect API key provided.', { code: 'invalid_api_key' });
    return;
  }
  if (behaviour.hang) return; // keep the socket open; only the client or close() ends it
  if (!(await pause(behaviour.latency ?? 0, res))) return;

  if (behaviour.status !== undefined) {
    const status = behaviour.status;
    sendError(res, status, `Simulated upstream error (status ${status}).`, {
      code: behaviour.error_code ?? DEFAULT_ERROR_CODES[status] ?? null,
      headers: status === 429 ? { 'retry-after': '1' } : {},
    });
    return;
  }

  const plan = planCompletion(request, behaviour);
  if (request.stream) {
    await streamCompletion(res, request, plan, behaviour);
    return;
  }
  if (behaviour.drop_after !== undefined) {
    res.destroy(); // connection dies after the request was read, before any answer
    return;
  }
  sendJson(res, 200, {
    id: completionId(),
    object: 'chat.completion',
    created: nowSeconds(),
    model: request.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: plan.pieces.join(' ') },
        logprobs: null,
        finish_reason: plan.finishReason,
      },
    ],
    ...(behaviour.no_usage ? {} : { usage: plan.usage }),
  });
}

function completionId(): string {
  return `chatcmpl-${randomUUID().replace(/-/g, '')}`;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

async function streamCompletion(res: ServerResponse, request: ChatRequest, plan: Plan, behaviour: Behaviour): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();

  const withUsage = request.includeUsage && !behaviour.no_usage;
  const head = { id: completionId(), object: 'chat.completion.chunk', created: nowSeconds(), model: request.model };
  // OpenAI sends `usage: null` on every chunk but the last when usage was requested.
  const tail = withUsage ? { usage: null } : {};
  const chunk = (delta: object, finishReason: string | null): string =>
    `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }], ...tail })}\n\n`;

  const delay = behaviour.chunk_delay ?? 0;
  let first = true;
  // Resolves false when the stream must stop (connection gone, or dropped on purpose).
  const send = async (data: string, dropAfter = false): Promise<boolean> => {
    if (!first && !(await pause(delay, res))) return false;
    first = false;
    if (res.destroyed) return false;
    if (dropAfter) {
      // Destroy once these bytes reached the kernel, so the client does see them.
      res.write(data, () => res.destroy());
      return false;
    }
    return res.write(data) || drained(res);
  };
  // A drop always happens when asked for: after min(N, content chunks) content chunks.
  const dropAt = behaviour.drop_after === undefined ? -1 : Math.min(behaviour.drop_after, plan.pieces.length);

  if (!(await send(chunk({ role: 'assistant', content: '' }, null), dropAt === 0))) return;
  for (let i = 0; i < plan.pieces.length; i++) {
    const piece = plan.pieces[i] ?? '';
    const content = i === 0 ? piece : ` ${piece}`;
    if (!(await send(chunk({ content }, null), i + 1 === dropAt))) return;
  }
  if (!(await send(chunk({}, plan.finishReason)))) return;
  if (withUsage) {
    const usageChunk = { ...head, choices: [], usage: plan.usage };
    if (!(await send(`data: ${JSON.stringify(usageChunk)}\n\n`))) return;
  }
  if (!(await send('data: [DONE]\n\n'))) return;
  res.end();
}
