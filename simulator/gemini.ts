// POST /v1beta/models/{model}:generateContent and :streamGenerateContent: Google's Gemini API on
// the shared plan, as one GenerateContentResponse, as server-sent events (`?alt=sse`: each event a
// whole GenerateContentResponse chunk) or as a JSON array of those chunks (no `alt`). Errors use
// Google's `{error:{code, message, status, details?}}`; the key is `x-goog-api-key` (or `?key=`).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { reasoningWords, type Plan } from './completion';
import { admit, sendPlain, type Dialect, type Failure } from './endpoint';
import { sendJson } from './http';
import { parseGeminiRequest, type GeminiRequest } from './gemini-request';
import { writeStream, type Frame } from './sse';
import type { SimState } from './state';

/** google.rpc.Code names by HTTP status, as the API reports them in `error.status`. */
const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'NOT_IMPLEMENTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

const statusName = (status: number) => STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION');

function sendGeminiError(res: ServerResponse, code: number, message: string, status = statusName(code), details?: object[]): void {
  sendJson(res, code, { error: { code, message, status, ...(details ? { details } : {}) } });
}

function failGemini(res: ServerResponse, f: Failure): void {
  if (f.reason === 'rejected_key') {
    // Google answers a bad key with 400, naming the reason in an ErrorInfo detail.
    const info = { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } };
    return sendGeminiError(res, 400, 'API key not valid. Please pass a valid API key.', 'INVALID_ARGUMENT', [info]);
  }
  if (f.reason === 'sim_control') return sendGeminiError(res, 400, `invalid_sim_control: ${f.message}`);
  if (f.reason === 'simulated') {
    const retry = f.status === 429 ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '1s' }] : undefined;
    return sendGeminiError(res, f.status, f.message, f.errorCode ?? statusName(f.status), retry);
  }
  if (f.reason === 'too_large') res.setHeader('connection', 'close');
  sendGeminiError(res, f.status, f.message);
}

function googleKey(req: IncomingMessage): string | null {
  const header = req.headers['x-goog-api-key'];
  const key = (Array.isArray(header) ? header[0] : header)?.trim();
  if (key) return key;
  return new URL(req.url ?? '/', 'http://sim').searchParams.get('key');
}

function geminiDialect(model: string, stream: boolean): Dialect<GeminiRequest> {
  return {
    endpoint: '/v1beta/models/{model}:generateContent',
    key: googleKey,
    // Gemini streams always carry usage metadata.
    describe: () => ({ model, stream, include_usage: stream }),
    parse: (body) => parseGeminiRequest(body, model),
    fail: failGemini,
  };
}

/** usageMetadata: candidates are the visible tokens; thoughts and cached tokens apart (cached ones are inside the prompt count). */
function usageMetadata(plan: Plan): Record<string, unknown> {
  const prompt = plan.usage.prompt_tokens;
  const thoughts = plan.reasoningTokens;
  const candidates = plan.usage.completion_tokens - thoughts;
  const cached = plan.usage.prompt_tokens_details.cached_tokens;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: prompt + candidates + thoughts,
    ...(cached ? { cachedContentTokenCount: cached } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
    ...(cached ? { cacheTokensDetails: [{ modality: 'TEXT', tokenCount: cached }] } : {}),
  };
}

/** Function calls end with STOP, as text does; only the token limit says MAX_TOKENS. */
const finishReason = (plan: Plan) => (plan.finishReason === 'length' ? 'MAX_TOKENS' : 'STOP');

const responseId = () => randomBytes(16).toString('base64url').slice(0, 22);

/** `data: <json>` + CRLF CRLF, as Google frames its event stream. */
const frame = (value: unknown, counted = false): Frame => ({ text: `data: ${JSON.stringify(value)}\r\n\r\n`, counted });

export async function serveGemini(req: IncomingMessage, res: ServerResponse, state: SimState, model: string, stream: boolean, sse: boolean): Promise<void> {
  if (googleKey(req) === null) {
    req.resume();
    return sendGeminiError(res, 403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
  }
  const admitted = await admit(req, res, state, geminiDialect(model, stream));
  if (!admitted) return;
  const { request, behaviour, plan } = admitted;
  const thoughts = request.includeThoughts && plan.reasoningTokens > 0 ? reasoningWords(request, plan.reasoningTokens).join(' ') : null;
  const head = { modelVersion: model, responseId: responseId() };
  const usage = behaviour.no_usage ? {} : { usageMetadata: usageMetadata(plan) };
  const candidate = (parts: object[], finish: string | null) => ({ content: { parts, role: 'model' }, ...(finish ? { finishReason: finish } : {}), index: 0 });
  const call = plan.toolCall && { functionCall: { name: plan.toolCall.name, args: JSON.parse(plan.toolCall.arguments) as unknown } };

  if (!stream) {
    const parts: object[] = [];
    if (thoughts) parts.push({ text: thoughts, thought: true });
    parts.push(call ?? { text: plan.pieces.join(' ') });
    return sendPlain(res, behaviour, () => sendJson(res, 200, { candidates: [candidate(parts, finishReason(plan))], ...usage, ...head }));
  }
  const frames = chunks(plan, thoughts, call, head, behaviour.no_usage === true, candidate);
  if (!sse) {
    // Without alt=sse the stream is one JSON array of the same chunks.
    return sendPlain(res, behaviour, () => sendJson(res, 200, [...frames].map((f) => JSON.parse(String(f.text).slice(6)) as unknown)));
  }
  await writeStream(res, frames, { delay: behaviour.chunk_delay ?? 0, dropAfter: behaviour.drop_after, countedTotal: call ? 1 : plan.pieces.length });
}

/**
 * [a thought chunk] → one chunk per token (a function call: one chunk holding the whole call) →
 * a last chunk with an empty text part, the finish reason and the full usage. Earlier chunks carry
 * the usage so far (prompt and total), as Google's do.
 */
function* chunks(
  plan: Plan,
  thoughts: string | null,
  call: object | null,
  head: object,
  noUsage: boolean,
  candidate: (parts: object[], finish: string | null) => object,
): Generator<Frame> {
  const prompt = plan.usage.prompt_tokens;
  const partial = (done: number) => (noUsage ? {} : { usageMetadata: { promptTokenCount: prompt, candidatesTokenCount: done, totalTokenCount: prompt + done, promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }] } });
  if (thoughts) yield frame({ candidates: [candidate([{ text: thoughts, thought: true }], null)], ...partial(0), ...head });
  if (call) yield frame({ candidates: [candidate([call], null)], ...partial(0), ...head }, true);
  else {
    for (let i = 0; i < plan.pieces.length; i++) {
      yield frame({ candidates: [candidate([{ text: i === 0 ? plan.pieces[i] : ` ${plan.pieces[i]}` }], null)], ...partial(i + 1), ...head }, true);
    }
  }
  yield frame({ candidates: [candidate([{ text: '' }], finishReason(plan))], ...(noUsage ? {} : { usageMetadata: usageMetadata(plan) }), ...head });
}
