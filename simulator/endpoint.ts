// The request pipeline every completion endpoint shares: read and record the body, validate
// it, resolve the controls, then apply them in a fixed order (reject_keys, hang, latency,
// status). Each wire format supplies its parser and its error shape as a Dialect.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { mergeBehaviour, parseDirectives, parseHeader, type Behaviour } from './behaviour';
import { planCompletion, toolCallError, type GenRequest, type Plan } from './completion';
import { pause, readBody } from './http';
import type { SimState } from './state';

export type FailureReason = 'too_large' | 'bad_json' | 'bad_request' | 'sim_control' | 'rejected_key' | 'simulated';

/** An error answer, described format-neutrally; the dialect renders it in its own shape. */
export interface Failure {
  reason: FailureReason;
  status: number;
  message: string;
  /** OpenAI `error.code`; for `simulated`, the `error_code` control when it is set. */
  code?: string | null;
  param?: string | null;
  headers?: OutgoingHttpHeaders;
  /** The `error_code` control as given (formats without `error.code` use it as the error type). */
  errorCode?: string;
}

export type Parsed<R> = { ok: true; request: R } | { ok: false; message: string; param: string };

export interface Dialect<R extends GenRequest> {
  /** Path recorded in /_sim/stats. */
  endpoint: string;
  key(req: IncomingMessage): string | null;
  /** Checks a signed request against its raw body (Bedrock's SigV4), before the body is parsed. */
  authenticate?(req: IncomingMessage, raw: Buffer): Promise<Failure | null>;
  /** Lenient extraction of the stats fields, for any parsed body (valid or not). */
  describe(body: unknown, req: IncomingMessage): { model: string | null; stream: boolean; include_usage: boolean };
  parse(body: unknown, req: IncomingMessage): Parsed<R>;
  fail(res: ServerResponse, failure: Failure): void;
}

export interface Admitted<R> {
  request: R;
  behaviour: Behaviour;
  plan: Plan;
}

export const DEFAULT_ERROR_CODES: Record<number, string> = {
  401: 'invalid_api_key',
  429: 'rate_limit_exceeded',
  500: 'server_error',
  503: 'service_unavailable',
};

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(',') : value;
}

/** Server defaults < message directive < request header. */
function resolveBehaviour(req: IncomingMessage, request: GenRequest, state: SimState): Behaviour | string {
  const directive = parseDirectives(request.allText);
  if (!directive.ok) return directive.error;
  const header = parseHeader(headerValue(req.headers['x-sim-behaviour']));
  if (!header.ok) return header.error;
  return mergeBehaviour(state.defaults.forModel(request.model), directive.behaviour, header.behaviour);
}

/**
 * Runs everything before the answer. Resolves null when the request was already answered
 * (an error), is left hanging, or its connection closed; otherwise the caller answers the plan.
 */
export async function admit<R extends GenRequest>(
  req: IncomingMessage,
  res: ServerResponse,
  state: SimState,
  dialect: Dialect<R>,
): Promise<Admitted<R> | null> {
  const read = await readBody(req);
  if (!read.ok) {
    dialect.fail(res, { reason: 'too_large', status: 413, message: 'Request body exceeds 32 MB.', headers: { connection: 'close' } });
    return null;
  }
  const key = dialect.key(req);
  const refused = await dialect.authenticate?.(req, read.body);
  if (refused) {
    state.stats.record({ endpoint: dialect.endpoint, model: null, stream: false, include_usage: false, key, body: null });
    dialect.fail(res, refused);
    return null;
  }
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    state.stats.record({ endpoint: dialect.endpoint, model: null, stream: false, include_usage: false, key, body: null });
    dialect.fail(res, { reason: 'bad_json', status: 400, message: 'We could not parse the JSON body of your request.', param: 'body' });
    return null;
  }
  const beta = headerValue(req.headers['anthropic-beta']);
  state.stats.record({ endpoint: dialect.endpoint, ...dialect.describe(body, req), key, body, ...(beta ? { anthropic_beta: beta } : {}) });

  const parsed = dialect.parse(body, req);
  if (!parsed.ok) {
    dialect.fail(res, { reason: 'bad_request', status: 400, message: parsed.message, param: parsed.param });
    return null;
  }
  const request = parsed.request;
  const behaviour = resolveBehaviour(req, request, state);
  const controlError = typeof behaviour === 'string' ? behaviour : toolCallError(request, behaviour);
  if (typeof behaviour === 'string' || controlError !== null) {
    dialect.fail(res, { reason: 'sim_control', status: 400, message: controlError ?? 'invalid simulator control', code: 'invalid_sim_control' });
    return null;
  }

  if (key !== null && behaviour.reject_keys?.includes(key)) {
    dialect.fail(res, { reason: 'rejected_key', status: 401, message: 'Incorrect API key provided.', code: 'invalid_api_key' });
    return null;
  }
  if (behaviour.hang) return null; // keep the socket open; only the client or close() ends it
  if (!(await pause(behaviour.latency ?? 0, res))) {
    state.stats.closed(dialect.endpoint);
    return null;
  }

  const given = state.statusGiven.get(request.model) ?? 0;
  if (behaviour.status !== undefined && (behaviour.status_times === undefined || given < behaviour.status_times)) {
    state.statusGiven.set(request.model, given + 1);
    const status = behaviour.status;
    const retryAfter = behaviour.retry_after ?? (status === 429 ? 1 : undefined);
    dialect.fail(res, {
      reason: 'simulated',
      status,
      message: `Simulated upstream error (status ${status}).`,
      code: behaviour.error_code ?? DEFAULT_ERROR_CODES[status] ?? null,
      errorCode: behaviour.error_code,
      headers: retryAfter !== undefined ? { 'retry-after': String(retryAfter) } : {},
    });
    return null;
  }
  return { request, behaviour, plan: planCompletion(request, behaviour) };
}

/** Non-streaming answer: drop_after destroys the connection after the request was read. */
export function sendPlain(res: ServerResponse, behaviour: Behaviour, send: () => void): void {
  if (behaviour.drop_after !== undefined) {
    res.destroy();
    return;
  }
  send();
}
