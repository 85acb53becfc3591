// The one table of the panel API's error codes (PANEL.md section 3). Handlers and services throw
// PanelError(code, details); the body is always {"error": {"code", "message", "details"}}.
export const PANEL_ERRORS = {
  validation_failed: { status: 400, message: 'The request is not valid: {detail}' },
  unauthenticated: { status: 401, message: 'Sign in first, or send Authorization: Bearer <API token>.' },
  invalid_credentials: { status: 401, message: 'The username or password is wrong.' },
  two_factor_code_required: { status: 401, message: 'This login has two-factor sign-in: send the 6-digit code from the authenticator app (or a recovery code).' },
  invalid_two_factor_code: { status: 401, message: 'The two-factor code is wrong or already used.' },
  two_factor_required: { status: 403, message: 'Logins of role {role} must set up two-factor sign-in first: only the account page, two-factor set-up, password change, API token listing and sign-out work until then.' },
  password_change_required: { status: 403, message: 'This password is temporary: change it first (POST /v1/account/password).' },
  forbidden: { status: 403, message: 'Not allowed: {detail}' },
  power_missing: { status: 403, message: "This needs the power '{power}', which {holder} does not hold." },
  suspended: { status: 403, message: 'This login or its organisation is suspended.' },
  not_found: { status: 404, message: 'No {what} with that id here.' },
  route_not_found: { status: 404, message: 'No route {method} {path}.' },
  method_not_allowed: { status: 405, message: 'Method {method} is not allowed on {path}.' },
  limit_reached: { status: 409, message: "The limit '{limit}' of {level} is {value}: {detail}" },
  capacity_exceeded: { status: 409, message: 'The declared capacity would be exceeded: {detail}' },
  conflict: { status: 409, message: '{detail}' },
  unsupported_media_type: { status: 415, message: 'Send application/json.' },
  unsafe_archive: { status: 422, message: 'The archive is refused as unsafe: {detail}' },
  header_too_large: { status: 431, message: 'The request line and headers are larger than {limit}.' },
  too_many_attempts: { status: 429, message: 'Too many failed sign-ins for this {scope}; retry in {retry_after} s.' },
  internal_error: { status: 500, message: 'Something went wrong on our side (request {request_id}).' },
  service_unavailable: { status: 503, message: 'The panel database is unavailable; retry shortly.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type PanelErrorCode = keyof typeof PANEL_ERRORS;

export class PanelError extends Error {
  readonly status: number;
  constructor(
    readonly code: PanelErrorCode,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    const template: string = PANEL_ERRORS[code].message;
    super(template.replace(/\{(\w+)\}/g, (_, k: string) => (details[k] === undefined ? `{${k}}` : String(details[k]))));
    this.status = PANEL_ERRORS[code].status;
  }

  toBody() {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/** A field's value is wrong: 400 validation_failed naming the field. */
export const invalid = (field: string, detail: string) => new PanelError('validation_failed', { field, detail: `${field}: ${detail}` });

/** Outside the caller's subtree or absent: both are 404, so existence does not leak. */
export const notFound = (what: string) => new PanelError('not_found', { what });
