// The one table of error codes. Handlers throw GatewayError(code, …); nothing else builds an
// error envelope.
export const ERRORS = {
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'Invalid request: {detail}' },
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  unsupported_parameter: { status: 400, type: 'invalid_request_error', message: "Unsupported parameter '{param}': {detail}" },
  no_cases_selected: { status: 400, type: 'invalid_request_error', message: 'No active case matches {detail}.' },
  invalid_parameter: { status: 400, type: 'invalid_request_error', message: "Invalid value for '{param}': {detail}" },
  invalid_audio: { status: 400, type: 'invalid_request_error', message: 'The audio is not usable: {detail}' },
  unsupported_audio_format: { status: 400, type: 'invalid_request_error', message: "Audio format '{format}' is not accepted; send wav, mp3, flac, m4a, ogg (opus or vorbis), webm or aac." },
  invalid_image_type: { status: 400, type: 'invalid_request_error', message: 'The file in {param} is not a PNG, JPEG or WebP image (judged by its content).' },
  invalid_multipart: { status: 400, type: 'invalid_request_error', message: 'Malformed multipart body: {detail}' },
  missing_required_parameter: { status: 400, type: 'invalid_request_error', message: "Missing required parameter '{param}'." },
  unsupported_capability: { status: 400, type: 'invalid_request_error', message: "Model '{model}' does not serve {endpoint}; {detail}" },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Invalid API key.' },
  missing_api_key: { status: 401, type: 'authentication_error', message: 'No API key: send Authorization: Bearer <key>, x-api-key or api-key.' },
  key_revoked: { status: 401, type: 'authentication_error', message: 'This API key has been revoked.' },
  account_deactivated: { status: 401, type: 'authentication_error', message: 'The account that owns this key is deactivated.' },
  admin_unauthorized: { status: 401, type: 'authentication_error', message: 'The admin API needs Authorization: Bearer <ADMIN_TOKEN>{detail}.' },
  missing_ci_token: { status: 401, type: 'authentication_error', message: 'No CI token: send Authorization: Bearer <CI token>.' },
  invalid_ci_token: { status: 401, type: 'authentication_error', message: 'Invalid or revoked CI token.' },
  insufficient_quota: { status: 402, type: 'insufficient_quota', message: 'Insufficient credits: this request needs {needed} credits held, the balance is {balance}.' },
  plan_expired: { status: 403, type: 'permission_error', message: 'The plan of this account expired at {expires_at}; inference is disabled until it is renewed.' },
  model_not_found: { status: 403, type: 'invalid_request_error', message: "Model '{model}' does not exist or is not active." },
  model_not_permitted: { status: 403, type: 'permission_error', message: "Model '{model}' is not available on the {tier} plan." },
  model_not_allowed: { status: 403, type: 'permission_error', message: "Model '{model}' is not in this API key's allowed models." },
  // detail: reached, or the hold does not fit in what is left (services/credits/holds.ts)
  key_spend_limit_exceeded: { status: 403, type: 'permission_error', message: '{detail}' },
  browser_request_refused: {
    status: 403,
    type: 'permission_error',
    message: 'The test-run API does not serve browsers ({detail}); call it from a server or CI job and keep CI tokens out of client-side code.',
  },
  not_found: { status: 404, type: 'invalid_request_error', message: '{detail}' },
  route_not_found: { status: 404, type: 'invalid_request_error', message: 'No route for {method} {path}.' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'Method {method} is not allowed on {path}.' },
  idempotency_key_reused: { status: 409, type: 'invalid_request_error', message: 'Idempotency-Key {key} was already used with a different request body.' },
  run_already_final: { status: 409, type: 'invalid_request_error', message: 'Run {run_id} is already {status}.' },
  conflict: { status: 409, type: 'invalid_request_error', message: '{detail}' },
  idempotent_replay: { status: 409, type: 'invalid_request_error', message: 'A request with this Idempotency-Key and the same content was already processed; its output is not stored. Use a new key for a new output.' },
  idempotent_request_in_progress: { status: 409, type: 'invalid_request_error', message: 'The request with this Idempotency-Key is still being processed; retry after {retry_after} seconds.' },
  generation_not_ready: { status: 409, type: 'invalid_request_error', message: 'Video {id} is {status}; its content is available once it is completed.' },
  content_expired: { status: 410, type: 'invalid_request_error', message: 'The content of video {id} is no longer held by the provider.' },
  range_not_satisfiable: { status: 416, type: 'invalid_request_error', message: 'Range not satisfiable: {detail}' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is larger than {limit}.' },
  header_too_large: { status: 431, type: 'invalid_request_error', message: 'The request line and headers are larger than {limit}.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: '{detail}' },
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many requests; retry after {retry_after} seconds.' },
  provider_rate_limited: { status: 429, type: 'rate_limit_error', message: 'The provider is rate limiting this model; retry later. No credits were deducted.' },
  generation_failed: { status: 502, type: 'api_error', message: 'The provider returned no result.' },
  provider_error: { status: 502, type: 'api_error', message: 'The provider failed: {detail}' },
  provider_timeout: { status: 504, type: 'api_error', message: 'The provider did not answer within {timeout_ms} ms.' },
  // detail: why each route was left out (domain/catalog/preferences.ts)
  no_route: { status: 400, type: 'invalid_request_error', message: 'No route is left for this request by its provider preferences: {detail}' },
  provider_unavailable: { status: 503, type: 'api_error', message: 'Model {model} is temporarily unavailable; retry later.' },
  model_pricing_unavailable: { status: 503, type: 'api_error', message: 'The tariff of model {model} is not synchronised yet; retry later.' },
  service_unavailable: { status: 503, type: 'api_error', message: '{detail}' },
  internal_error: { status: 500, type: 'api_error', message: 'Internal error; request id {request_id}.' },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: string };
}

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  constructor(
    readonly code: ErrorCode,
    readonly vars: Record<string, string | number | undefined> = {},
    readonly headers: Record<string, string> = {},
  ) {
    const spec = ERRORS[code];
    // `also`: further refusals of the same request (api/shared/validate.ts)
    const message = spec.message.replace(/\{(\w+)\}/g, (_, k: string) => String(vars[k] ?? ''));
    super(vars.also ? `${message}${message.endsWith('.') ? '' : '.'} ${vars.also}` : message);
    this.status = spec.status;
    this.type = spec.type;
    this.param = vars.param === undefined ? null : String(vars.param);
  }

  toEnvelope(): ErrorEnvelope {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}
