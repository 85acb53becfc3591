import type { Context } from 'koa';
import { errors as undiciErrors } from 'undici';
import { GatewayError } from '../../domain/errors';
import { convertProviderCost, holdForText, type TokenUsage } from '../../domain/pricing';
import type { RequestReport } from '../../domain/reservation';
import { CHAT_PATH, chatRequest, deltaText, extractUsage } from '../../providers/openai/chat';
import { sseEvents } from '../../providers/sse';
import { postUpstream, UpstreamFailure, type UpstreamResponse } from '../../providers/upstream';
import type { AuthRecord } from '../auth-store';
import type { Catalog, Provider } from '../catalog';
import { readJsonObject } from '../http';
import type { Hold, Reservations } from '../reservations';
import { validate } from '../validate';
import { checkAccess } from './access';
import { chatRequestSchema, promptTokenBound, promptTokenEstimate, type ChatRequest } from './chat-schema';
import { chargeFor, chatUsage } from './usage-view';

export interface ChatDeps {
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
}

const ENDPOINT = '/v1/chat/completions';

/** POST /v1/chat/completions: hold, forward, answer with credits, report to the reservation workflow. */
export function chatCompletions(deps: ChatDeps) {
  return async (ctx: Context) => {
    const started = Date.now();
    const body = await readJsonObject(ctx);
    const req = validate(chatRequestSchema, body);
    const auth: AuthRecord = ctx.state.auth;
    const { model, provider, complimentary } = await checkAccess(deps.catalog, auth, req.model, 'text', ENDPOINT);
    checkAudio(req, model.capabilities);
    const maxOutput = req.max_completion_tokens ?? req.max_tokens ?? model.max_output_tokens;
    if (maxOutput > model.max_output_tokens) {
      throw new GatewayError('invalid_parameter', { param: req.max_completion_tokens ? 'max_completion_tokens' : 'max_tokens', detail: `at most ${model.max_output_tokens} for ${model.id}` });
    }
    const held = complimentary ? '0' : holdForText(model, promptTokenBound(req), maxOutput);
    const hold = await deps.reservations.hold({
      reservationId: ctx.state.requestId,
      accountId: auth.accountId,
      keyId: auth.keyId,
      model: model.id,
      provider: provider.id,
      endpoint: ENDPOINT,
      tariff: model,
      held,
      complimentary,
    });
    const report = (r: Omit<RequestReport, 'latencyMs'>) => void hold.report({ ...r, latencyMs: Date.now() - started });
    const stream = req.stream === true;
    const abort = new AbortController();
    let upstream: UpstreamResponse;
    try {
      upstream = await postUpstream(provider, CHAT_PATH, chatRequest(body, model.upstream_model, stream), { timeoutMs: deps.upstreamTimeoutMs, signal: abort.signal });
    } catch (err) {
      throw failed(err, report, deps.upstreamTimeoutMs);
    }
    if (upstream.statusCode !== 200) throw await upstreamError(upstream, report, model.id);
    ctx.set('x-gateway-request-id', hold.reservationId);
    if (stream) return streamChat(ctx, upstream, hold, provider, req, abort, report);

    let json: { id?: string; usage?: Record<string, unknown> };
    try {
      json = (await upstream.body.json()) as typeof json;
    } catch (err) {
      throw failed(err, report, deps.upstreamTimeoutMs, 'generation_failed');
    }
    const extracted = extractUsage(json.usage);
    const providerCost = extracted?.cost ? convertProviderCost(extracted.cost, provider.credits_per_cost_unit) : null;
    const charge = chargeFor(hold, extracted?.usage ?? null, providerCost);
    if (extracted && json.usage) json.usage = chatUsage(json.usage, hold, charge);
    else delete json.usage;
    report({ outcome: 'completed', billable: true, usage: extracted?.usage ?? null, providerCost, httpStatus: 200, bodyId: json.id ?? null });
    ctx.set('x-gateway-cost', charge.charge);
    ctx.body = json;
  };
}

function checkAudio(req: ChatRequest, capabilities: string[]): void {
  if (!req.modalities?.includes('audio')) return;
  if (!capabilities.includes('audio_output')) {
    throw new GatewayError('unsupported_capability', { model: req.model, endpoint: 'audio output', param: 'modalities', detail: 'choose a model with the audio_output capability.' });
  }
  if (req.stream !== true) throw new GatewayError('invalid_parameter', { param: 'stream', detail: 'audio output needs stream: true' });
  if (!req.audio) throw new GatewayError('missing_required_parameter', { param: 'audio' });
}

/** Maps a failed upstream call to the client's error and reports it; nothing is billed. */
function failed(err: unknown, report: (r: Omit<RequestReport, 'latencyMs'>) => void, timeoutMs: number, code: 'generation_failed' | null = null): GatewayError {
  const base = { billable: false, usage: null, providerCost: null } as const;
  if (err instanceof UpstreamFailure) {
    report({ ...base, outcome: 'failed', uncertain: err.maySent, httpStatus: err.kind === 'timeout' ? 504 : 502, error: err.message });
    if (err.kind === 'timeout') return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
    return err.maySent ? new GatewayError('provider_error', { detail: err.message }) : new GatewayError('provider_unavailable', { model: '' });
  }
  const timeout = err instanceof undiciErrors.BodyTimeoutError;
  report({ ...base, outcome: 'failed', uncertain: true, httpStatus: 502, error: String(err) });
  if (timeout) return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
  return code ? new GatewayError(code) : new GatewayError('provider_error', { detail: 'the connection broke while reading the answer' });
}

async function upstreamError(res: UpstreamResponse, report: (r: Omit<RequestReport, 'latencyMs'>) => void, model: string): Promise<GatewayError> {
  let detail = `HTTP ${res.statusCode}`;
  try {
    const j = (await res.body.json()) as { error?: { message?: string } };
    if (j?.error?.message) detail = j.error.message;
  } catch {
    // not JSON: keep the status line
  }
  report({ outcome: 'failed', billable: false, usage: null, providerCost: null, httpStatus: res.statusCode, error: detail });
  const s = res.statusCode;
  if (s === 429) return new GatewayError('provider_rate_limited', {}, { 'retry-after': res.headers['retry-after']?.toString() ?? '1' });
  if (s === 401 || s === 403) return new GatewayError('provider_unavailable', { model });
  if (s >= 400 && s < 500) return new GatewayError('invalid_request', { detail: `the provider rejected the request: ${detail}` });
  return new GatewayError('provider_error', { detail });
}

/**
 * Streams chunks through unchanged as they arrive. The finish chunk is held back until the
 * usage chunk arrives, so usage goes out once, in that last chunk before [DONE].
 */
async function streamChat(
  ctx: Context,
  upstream: UpstreamResponse,
  hold: Hold,
  provider: Provider,
  req: ChatRequest,
  abort: AbortController,
  report: (r: Omit<RequestReport, 'latencyMs'>) => void,
): Promise<void> {
  ctx.respond = false;
  const res = ctx.res;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-gateway-request-id': hold.reservationId,
  });
  res.flushHeaders();
  let clientGone = false;
  res.once('close', () => {
    if (!res.writableFinished) {
      clientGone = true;
      abort.abort();
    }
  });

  let sentChars = 0;
  let finish: Record<string, unknown> | null = null;
  let usageRaw: Record<string, unknown> | null = null;
  let bodyId: string | null = null;
  let done = false;
  try {
    for await (const ev of sseEvents(upstream.body)) {
      if (ev.data === null) continue;
      if (ev.data === '[DONE]') {
        done = true;
        break;
      }
      let chunk: { id?: string; choices?: Array<{ finish_reason?: string | null; delta?: Record<string, unknown> }>; usage?: Record<string, unknown> | null };
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        continue; // not a JSON chunk: nothing a client can use
      }
      bodyId ??= chunk.id ?? null;
      if (chunk.usage) usageRaw = chunk.usage;
      if (chunk.choices?.some((c) => c.finish_reason)) {
        finish = { ...chunk };
        delete finish.usage;
        continue;
      }
      if (!chunk.choices?.length) continue; // the separate usage chunk
      sentChars += deltaText(chunk).length;
      res.write(ev.raw + '\n\n');
    }
  } catch (err) {
    if (!clientGone) {
      report({ outcome: 'failed', billable: false, uncertain: true, usage: null, providerCost: null, httpStatus: 502, bodyId, error: `stream broke: ${String(err)}` });
      res.end(`data: ${JSON.stringify(new GatewayError('provider_error', { detail: 'the provider stream broke' }).toEnvelope())}\n\n`);
      return;
    }
  }
  if (clientGone) {
    // Settle from what was already sent; no usage chunk goes out.
    const usage: TokenUsage = { prompt_tokens: promptTokenEstimate(req), completion_tokens: Math.ceil(sentChars / 4), cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null };
    report({ outcome: 'cancelled', billable: true, usage, providerCost: null, httpStatus: 499, bodyId });
    return;
  }
  if (!done && !finish) {
    report({ outcome: 'failed', billable: false, uncertain: true, usage: null, providerCost: null, httpStatus: 502, bodyId, error: 'stream ended early' });
    res.end(`data: ${JSON.stringify(new GatewayError('provider_error', { detail: 'the provider stream ended early' }).toEnvelope())}\n\n`);
    return;
  }
  const extracted = extractUsage(usageRaw);
  const providerCost = extracted?.cost ? convertProviderCost(extracted.cost, provider.credits_per_cost_unit) : null;
  const charge = chargeFor(hold, extracted?.usage ?? null, providerCost);
  report({ outcome: 'completed', billable: true, usage: extracted?.usage ?? null, providerCost, httpStatus: 200, bodyId });
  const last = finish ?? { id: bodyId, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] };
  if (extracted && usageRaw) last.usage = chatUsage(usageRaw, hold, charge);
  res.write(`data: ${JSON.stringify(last)}\n\n`);
  res.end('data: [DONE]\n\n');
}
