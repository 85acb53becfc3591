import { errors as undiciErrors } from 'undici';
import { GatewayError } from '../../../domain/shared/errors';
import { keyRefused, UpstreamFailure, type UpstreamResponse } from '../../../providers/upstream';
import type { Report } from './billable-call';

// The one mapping of failed provider calls to the client's error (spec 1 section 7), shared by
// text, images, audio and video: a call that did not complete, and a provider's non-200 answer.
// Both are reported as not billed.

const NOT_BILLED = { outcome: 'failed', billable: false, usage: null, providerCost: null } as const;

/** Maps a failed upstream call to the client's error and reports it. */
export function upstreamFailure(err: unknown, report: Report, timeoutMs: number, model: string, code: 'generation_failed' | null = null): GatewayError {
  if (err instanceof GatewayError) {
    report({ ...NOT_BILLED, httpStatus: err.status, error: err.message });
    return err;
  }
  if (err instanceof UpstreamFailure) {
    report({ ...NOT_BILLED, uncertain: err.maySent, httpStatus: err.kind === 'timeout' ? 504 : 502, error: err.message });
    if (err.kind === 'timeout') return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
    return err.maySent ? new GatewayError('provider_error', { detail: err.message }) : new GatewayError('provider_unavailable', { model });
  }
  report({ ...NOT_BILLED, uncertain: true, httpStatus: 502, error: String(err) });
  if (err instanceof undiciErrors.BodyTimeoutError) return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
  return code ? new GatewayError(code) : new GatewayError('provider_error', { detail: 'the connection broke while reading the answer' });
}

export interface RefusalOptions {
  /** the provider's message in its error body; default `error.message` */
  message?: (body: unknown) => string | null | undefined;
  /** an endpoint's own mapping of a refusal, tried first (e.g. an unsupported audio format) */
  special?: (status: number, code: string | undefined) => GatewayError | null;
}

const defaultMessage = (body: unknown) => (body as { error?: { message?: string } } | null)?.error?.message;

/** A provider's non-200 answer as read: its status, message and error code. */
export interface Refusal {
  status: number;
  detail: string;
  code: string | undefined;
  retryAfter: string | undefined;
  /** the provider refused its key (not the request): the gateway's problem, never the client's */
  keyRejected?: boolean;
}

/** Reads a provider's non-200 answer (its body is consumed). */
export async function readRefusal(res: UpstreamResponse, o: RefusalOptions = {}): Promise<Refusal> {
  let detail = `HTTP ${res.statusCode}`;
  let code: string | undefined;
  try {
    const body = await res.body.json();
    detail = ((o.message ?? defaultMessage)(body) ?? detail).slice(0, 500);
    code = (body as { error?: { code?: string } } | null)?.error?.code;
  } catch {
    // not JSON: keep the status line
  }
  return { status: res.statusCode, detail, code, retryAfter: res.headers['retry-after']?.toString(), ...(keyRefused(res) ? { keyRejected: true } : {}) };
}

/** A provider's non-200 answer: read, reported (not billed) and mapped to the client's error. */
export async function upstreamRefusal(res: UpstreamResponse, report: Report, model: string, o: RefusalOptions = {}): Promise<GatewayError> {
  return refusalError(await readRefusal(res, o), report, model, o);
}

/** Reports a refusal (not billed) and maps it to the client's error. */
export function refusalError(r: Refusal, report: Report, model: string, o: RefusalOptions = {}): GatewayError {
  report({ ...NOT_BILLED, httpStatus: r.status, error: r.detail });
  const s = r.status;
  const special = o.special?.(s, r.code);
  if (special) return special;
  if (s === 429) return new GatewayError('provider_rate_limited', {}, { 'retry-after': r.retryAfter ?? '1' });
  if (r.keyRejected) return new GatewayError('provider_unavailable', { model });
  if (s >= 400 && s < 500) return new GatewayError('invalid_request', { detail: `the provider rejected the request: ${r.detail}` });
  return new GatewayError('provider_error', { detail: r.detail });
}

/** The last failure of a request whose routes all failed (null: all were skipped) mapped to the client's error and reported. */
export function routeFailure(failure: UpstreamFailure | Refusal | null, report: Report, timeoutMs: number, model: string): GatewayError {
  if (failure === null) return upstreamFailure(new GatewayError('provider_unavailable', { model }), report, timeoutMs, model);
  return failure instanceof UpstreamFailure ? upstreamFailure(failure, report, timeoutMs, model) : refusalError(failure, report, model);
}
