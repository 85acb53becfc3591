import { errors as undiciErrors } from 'undici';
import { GatewayError } from '../../../domain/shared/errors';
import type { RequestReport } from '../../../domain/credits/reservation';
import { UpstreamFailure } from '../../../providers/upstream';

export type Report = (r: Omit<RequestReport, 'latencyMs'>) => void;

/** Maps a failed upstream call to the client's error and reports it; nothing is billed. */
export function upstreamFailure(err: unknown, report: Report, timeoutMs: number, model: string, code: 'generation_failed' | null = null): GatewayError {
  const base = { billable: false, usage: null, providerCost: null } as const;
  if (err instanceof GatewayError) {
    report({ ...base, outcome: 'failed', httpStatus: err.status, error: err.message });
    return err;
  }
  if (err instanceof UpstreamFailure) {
    report({ ...base, outcome: 'failed', uncertain: err.maySent, httpStatus: err.kind === 'timeout' ? 504 : 502, error: err.message });
    if (err.kind === 'timeout') return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
    return err.maySent ? new GatewayError('provider_error', { detail: err.message }) : new GatewayError('provider_unavailable', { model });
  }
  report({ ...base, outcome: 'failed', uncertain: true, httpStatus: 502, error: String(err) });
  if (err instanceof undiciErrors.BodyTimeoutError) return new GatewayError('provider_timeout', { timeout_ms: timeoutMs });
  return code ? new GatewayError(code) : new GatewayError('provider_error', { detail: 'the connection broke while reading the answer' });
}
