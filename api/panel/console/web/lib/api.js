// The console's one way to the JSON API (/v1): the session cookie rides along (same origin), the
// session's CSRF token (x-csrf-token, handed out by the API on every cookie response) goes back on
// every change, and an error is thrown with the API's own message, shown as it is.

let csrf = null;
const listeners = new Set();

export class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error ? body.error : { code: 'http_' + status, message: `The panel answered ${status}.`, details: {} };
    super(e.message);
    this.status = status;
    this.code = e.code;
    this.details = e.details || {};
  }
}

/** Called with every ApiError whose code needs the whole console to react (sign-in, password, two-factor). */
export const onApiError = (fn) => listeners.add(fn);

export async function api(method, path, body, { quiet = false } = {}) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  csrf = res.headers.get('x-csrf-token') || csrf;
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null; // not JSON (a proxy's error page): the status speaks
  }
  if (!res.ok) {
    const err = new ApiError(res.status, json);
    if (!quiet) for (const fn of listeners) fn(err, method, path);
    throw err;
  }
  return json;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path, body) => api('DELETE', path, body);
/** The CSRF header for a request made without api() (a raw file upload). */
export const csrfHeader = () => (csrf ? { 'x-csrf-token': csrf } : {});
export const forgetSession = () => {
  csrf = null;
};

/** The QR code of an otpauth:// URI as an SVG data URL (drawn by the panel: the browser needs no QR library). */
export async function qrDataUrl(text) {
  const res = await fetch('/console/qr', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text }) });
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => null));
  return 'data:image/svg+xml;base64,' + btoa(await res.text());
}
