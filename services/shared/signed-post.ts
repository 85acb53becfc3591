import { createHmac } from 'node:crypto';
import { request, type Dispatcher } from 'undici';

// One signed webhook POST, shared by the panel's webhooks (services/panel/alerts/webhooks.ts)
// and the gateway's account webhooks (services/accounts/webhooks.ts): the signature header is
// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.

/** how long one attempt may take */
export const ATTEMPT_TIMEOUT_MS = 10_000;

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`. */
export function signature(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface SignedPost {
  url: string;
  body: string;
  secret: string;
  /** the header carrying the signature */
  signatureHeader: string;
  /** user-agent and the sender's own headers */
  headers: Record<string, string>;
}

/** POSTs a signed JSON body; a 2xx delivered it (error null), anything else names what happened. */
export async function postSigned(dispatcher: Dispatcher, p: SignedPost): Promise<{ status: number | null; error: string | null; latencyMs: number }> {
  const t = Math.floor(Date.now() / 1000);
  const started = process.hrtime.bigint();
  let status: number | null = null;
  let error: string | null = null;
  try {
    const res = await request(p.url, {
      method: 'POST',
      dispatcher,
      body: p.body,
      headers: { 'content-type': 'application/json', ...p.headers, [p.signatureHeader]: signature(p.secret, t, p.body) },
      headersTimeout: ATTEMPT_TIMEOUT_MS,
      bodyTimeout: ATTEMPT_TIMEOUT_MS,
    });
    status = res.statusCode;
    await res.body.dump();
    if (status < 200 || status > 299) error = `the receiver answered ${status}`;
  } catch (err) {
    error = (err as Error).message || String(err);
  }
  return { status, error, latencyMs: Math.round(Number(process.hrtime.bigint() - started) / 1e6) };
}
