// POST /model/{modelId}/converse and /converse-stream: Amazon Bedrock's Converse API on the shared
// plan. Every call must carry a valid AWS Signature V4 (checked with @smithy/signature-v4, the
// signer the AWS SDKs use); the secret of an access key id K is `simSecret/K`. A stream is binary
// event-stream frames (@smithy/eventstream-codec); errors are `{message}` with x-amzn-ErrorType.
import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { SignatureV4 } from '@smithy/signature-v4';
import type { SourceData } from '@smithy/types';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import { parseConverseRequest, type ConverseRequest } from './bedrock-request';
import { reasoningWords, type Plan } from './completion';
import { admit, sendPlain, type Dialect, type Failure } from './endpoint';
import { sendJson } from './http';
import { writeStream, type Frame } from './sse';
import type { SimState } from './state';

/** The secret access key the simulator expects for an access key id. */
export const simSecretFor = (accessKeyId: string) => `simSecret/${accessKeyId}`;

const SIGNATURE = 'sim-sig';
const CORAL = 'http://internal.amazon.com/coral/com.amazon.bedrock/';

// The exception Bedrock answers each status with (the `status` control; `error_code` names another).
const EXCEPTION_OF: Record<number, string> = {
  400: 'ValidationException',
  403: 'AccessDeniedException',
  404: 'ResourceNotFoundException',
  408: 'ModelTimeoutException',
  424: 'ModelErrorException',
  429: 'ThrottlingException',
  500: 'InternalServerException',
  503: 'ServiceUnavailableException',
};

function exceptionOf(f: Failure): string {
  if (f.errorCode !== undefined) return f.errorCode;
  if (f.reason === 'bad_json') return 'SerializationException';
  if (f.reason === 'rejected_key') return 'UnrecognizedClientException';
  return EXCEPTION_OF[f.status] ?? (f.status >= 500 ? 'InternalServerException' : 'ValidationException');
}

function failConverse(res: ServerResponse, f: Failure): void {
  const type = exceptionOf(f);
  const message = f.reason === 'rejected_key' && f.errorCode === undefined ? 'The security token included in the request is invalid.' : f.reason === 'sim_control' ? `invalid_sim_control: ${f.message}` : f.message;
  // AWS refuses every credential problem with 403 (the shared pipeline says 401 for a rejected key)
  const status = f.reason === 'rejected_key' ? 403 : f.status;
  sendJson(res, status, { message }, { ...f.headers, 'x-amzn-errortype': `${type}:${CORAL}`, 'x-amzn-requestid': randomUUID() });
}

const AUTH = /^AWS4-HMAC-SHA256 Credential=([A-Z0-9]{16,128})\/(\d{8})\/([a-z0-9-]+)\/([a-z0-9-]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const SKEW_MS = 5 * 60_000;

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
};

const bytes = (d: SourceData) => (typeof d === 'string' ? d : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : new Uint8Array(d));

/** node:crypto behind the hash interface @smithy/signature-v4 takes (HMAC when given a secret). */
class NodeSha256 {
  private readonly h;
  constructor(secret?: SourceData) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
}

const refuse = (errorCode: string, message: string): Failure => ({ reason: 'rejected_key', status: 403, message, errorCode });

/**
 * Verifies the SigV4 Authorization header: its shape, the credential scope (date of x-amz-date,
 * service bedrock), the payload hash, and the signature itself, recomputed over the headers it names.
 */
async function verifySigV4(req: IncomingMessage, raw: Buffer): Promise<Failure | null> {
  const auth = header(req, 'authorization');
  if (!auth) return refuse('MissingAuthenticationTokenException', 'Missing Authentication Token');
  const m = AUTH.exec(auth);
  if (!m) return refuse('IncompleteSignatureException', `Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters (AWS4-HMAC-SHA256).`);
  const [, accessKeyId, scopeDate, region, service, signedHeaders, signature] = m;
  const amzDate = header(req, 'x-amz-date') ?? '';
  const d = AMZ_DATE.exec(amzDate);
  if (!d) return refuse('IncompleteSignatureException', 'Authorization header requires existence of either a \'X-Amz-Date\' or a \'Date\' header.');
  if (service !== 'bedrock') return refuse('InvalidSignatureException', `Credential should be scoped to correct service: 'bedrock'.`);
  if (scopeDate !== amzDate.slice(0, 8)) return refuse('InvalidSignatureException', 'Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP.');
  const signingDate = new Date(Date.UTC(+d[1], +d[2] - 1, +d[3], +d[4], +d[5], +d[6]));
  if (Math.abs(Date.now() - signingDate.getTime()) > SKEW_MS) return refuse('InvalidSignatureException', `Signature expired: ${amzDate} is now earlier or later than 5 minutes from the server time.`);
  const names = signedHeaders.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date')) return refuse('InvalidSignatureException', 'The host and x-amz-date headers must be signed.');
  const contentHash = header(req, 'x-amz-content-sha256');
  if (contentHash !== undefined && contentHash !== createHash('sha256').update(raw).digest('hex')) return refuse('InvalidSignatureException', 'The provided x-amz-content-sha256 header does not match what was computed.');
  const headers: Record<string, string> = {};
  for (const name of names) headers[name] = header(req, name) ?? '';
  const url = new URL(req.url ?? '/', 'http://sim');
  const signer = new SignatureV4({ service: 'bedrock', region, sha256: NodeSha256, credentials: { accessKeyId, secretAccessKey: simSecretFor(accessKeyId), sessionToken: header(req, 'x-amz-security-token') } });
  const query: Record<string, string> = Object.fromEntries(url.searchParams);
  const signed = await signer.sign(
    { method: req.method ?? 'POST', protocol: 'http:', hostname: url.hostname, path: (req.url ?? '/').split('?')[0], query, headers, body: raw },
    { signingDate, signableHeaders: new Set(names) },
  );
  const expected = /Signature=([0-9a-f]{64})/.exec(String(signed.headers.authorization))?.[1] ?? '';
  if (expected.length !== signature.length || !timingSafeEqual(Buffer.from(expected), Buffer.from(signature))) {
    return refuse('InvalidSignatureException', 'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.');
  }
  return null;
}

/** The access key id of the Authorization header (reject_keys names access key ids). */
function accessKeyOf(req: IncomingMessage): string | null {
  return /Credential=([A-Z0-9]+)\//.exec(header(req, 'authorization') ?? '')?.[1] ?? null;
}

function converseDialect(modelId: string, stream: boolean): Dialect<ConverseRequest> {
  return {
    endpoint: stream ? '/model/{modelId}/converse-stream' : '/model/{modelId}/converse',
    key: accessKeyOf,
    authenticate: verifySigV4,
    describe: () => ({ model: modelId, stream, include_usage: stream }),
    parse: (body) => parseConverseRequest(body, modelId, stream),
    fail: failConverse,
  };
}

function stopReason(plan: Plan): string {
  if (plan.finishReason === 'tool_calls') return 'tool_use';
  if (plan.stopSequence !== null) return 'stop_sequence';
  return plan.finishReason === 'length' ? 'max_tokens' : 'end_turn';
}

/** inputTokens excludes cache reads and writes (never below 0); totalTokens counts all. */
function converseUsage(plan: Plan) {
  const { prompt_tokens: prompt, prompt_tokens_details: cache, completion_tokens: output } = plan.usage;
  const input = Math.max(0, prompt - cache.cached_tokens - cache.cache_write_tokens);
  return { inputTokens: input, outputTokens: output, totalTokens: input + output + cache.cached_tokens + cache.cache_write_tokens, cacheReadInputTokens: cache.cached_tokens, cacheWriteInputTokens: cache.cache_write_tokens };
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const str = (value: string) => ({ type: 'string' as const, value });

/** One event-stream message: `:event-type`, `:content-type`, `:message-type` headers and a JSON payload. */
function eventMessage(type: string, value: object, counted = false): Frame {
  const headers = { ':event-type': str(type), ':content-type': str('application/json'), ':message-type': str('event') };
  // Bedrock pads every event with a `p` field of varying length (it hides the token lengths).
  return { text: codec.encode({ headers, body: fromUtf8(JSON.stringify({ ...value, p: 'abcdefghij'.slice(0, 1 + (JSON.stringify(value).length % 10)) })) }), counted };
}

function exceptionMessage(type: string, message: string): Frame {
  const headers = { ':exception-type': str(type), ':content-type': str('application/json'), ':message-type': str('exception') };
  return { text: codec.encode({ headers, body: fromUtf8(JSON.stringify({ message })) }), counted: false };
}

/**
 * messageStart; reasoning deltas and its signature; a toolUse block (contentBlockStart, input
 * deltas) or text deltas; contentBlockStop; messageStop; metadata with usage. `failAfter`: an
 * in-stream exception replaces the rest after that many counted events.
 */
function* converseFrames(plan: Plan, thinking: string[] | null, toolId: string, withUsage: boolean, failAfter: { count: number; type: string } | null): Generator<Frame> {
  let counted = 0;
  const frames = function* (): Generator<Frame> {
    yield eventMessage('messageStart', { role: 'assistant' });
    let index = 0;
    if (thinking) {
      for (let i = 0; i < thinking.length; i++) yield eventMessage('contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { text: i === 0 ? thinking[i] : ` ${thinking[i]}` } } });
      yield eventMessage('contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { signature: SIGNATURE } } });
      yield eventMessage('contentBlockStop', { contentBlockIndex: index });
      index += 1;
    }
    if (plan.toolCall) {
      yield eventMessage('contentBlockStart', { contentBlockIndex: index, start: { toolUse: { toolUseId: toolId, name: plan.toolCall.name } } });
      for (const fragment of plan.toolCall.fragments) yield eventMessage('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: fragment } } }, true);
    } else {
      for (let i = 0; i < plan.pieces.length; i++) yield eventMessage('contentBlockDelta', { contentBlockIndex: index, delta: { text: i === 0 ? plan.pieces[i] : ` ${plan.pieces[i]}` } }, true);
    }
    yield eventMessage('contentBlockStop', { contentBlockIndex: index });
    yield eventMessage('messageStop', { stopReason: stopReason(plan) });
    if (withUsage) yield eventMessage('metadata', { usage: converseUsage(plan), metrics: { latencyMs: 1 } });
  };
  for (const frame of frames()) {
    yield frame;
    if (frame.counted) counted += 1;
    if (failAfter && counted === failAfter.count) {
      yield exceptionMessage(failAfter.type, 'The model stream failed (simulated).');
      return;
    }
  }
}

const ROUTE = /^\/model\/([^/]+)\/(converse|converse-stream)$/;

/** True when `path` is a Converse route (answered here); false otherwise. */
export async function routeBedrock(req: IncomingMessage, res: ServerResponse, state: SimState, path: string): Promise<boolean> {
  const m = ROUTE.exec(path);
  if (!m) return false;
  if (req.method !== 'POST') {
    sendJson(res, 405, { message: 'Method not allowed.' }, { allow: 'POST' });
    return true;
  }
  await serveConverse(req, res, state, decodeURIComponent(m[1]), m[2] === 'converse-stream');
  return true;
}

async function serveConverse(req: IncomingMessage, res: ServerResponse, state: SimState, modelId: string, stream: boolean): Promise<void> {
  const dialect = converseDialect(modelId, stream);
  const admitted = await admit(req, res, state, dialect);
  if (!admitted) return;
  const { request, behaviour, plan } = admitted;
  const thinking = plan.reasoningTokens > 0 ? reasoningWords(request, plan.reasoningTokens) : null;
  const toolId = `tooluse_${randomUUID().replace(/-/g, '').slice(0, 22)}`;
  const requestId = randomUUID();
  if (stream) {
    // drop_after with error_code: an in-stream exception frame of that name instead of a dropped socket
    const failAfter = behaviour.drop_after !== undefined && behaviour.error_code !== undefined ? { count: behaviour.drop_after, type: behaviour.error_code } : null;
    res.setHeader('x-amzn-requestid', requestId);
    const completed = await writeStream(res, converseFrames(plan, thinking, toolId, !behaviour.no_usage, failAfter), {
      delay: behaviour.chunk_delay ?? 0,
      dropAfter: failAfter ? undefined : behaviour.drop_after,
      countedTotal: plan.toolCall ? plan.toolCall.fragments.length : plan.pieces.length,
      contentType: 'application/vnd.amazon.eventstream',
    });
    if (!completed) state.stats.closed(dialect.endpoint);
    return;
  }
  const content: object[] = [];
  if (thinking) content.push({ reasoningContent: { reasoningText: { text: thinking.join(' '), signature: SIGNATURE } } });
  if (plan.toolCall) content.push({ toolUse: { toolUseId: toolId, name: plan.toolCall.name, input: JSON.parse(plan.toolCall.arguments) as unknown } });
  else content.push({ text: plan.pieces.join(' ') });
  sendPlain(res, behaviour, () =>
    sendJson(
      res,
      200,
      { output: { message: { role: 'assistant', content } }, stopReason: stopReason(plan), ...(behaviour.no_usage ? {} : { usage: converseUsage(plan) }), metrics: { latencyMs: 1 } },
      { 'x-amzn-requestid': requestId },
    ),
  );
}
