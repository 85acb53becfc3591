import { BedrockRuntimeClient, BedrockRuntimeServiceException, ConverseCommand, ConverseStreamCommand, type ConverseCommandInput, type ConverseStreamOutput } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { LRUCache } from 'lru-cache';
import type { Provider } from '../../domain/catalog/model';
import { bufferedResponse, sendWithKeys, UpstreamFailure, type UpstreamOptions, type UpstreamResponse } from '../upstream';

// Calls Bedrock through the official client (SigV4 signing, event-stream decoding) and hands the
// gateway an ordinary UpstreamResponse: a Converse answer as its JSON, a ConverseStream as
// server-sent events (`event: <event name>`, `data: <event JSON>`), an exception as its status
// with `{message}`. The client never retries (the gateway decides) and never looks for
// credentials or settings of its own: the provider row's region (settings) and keys only.

/** A provider key: `ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]` (its shape checked by `bedrock.checkSettings`). */
function credentialsOf(key: string) {
  const [accessKeyId, secretAccessKey, sessionToken] = key.split(':');
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

// One client per provider, key and timeout: each keeps its own keep-alive sockets. Rotated keys and
// edited providers make new ones, so the least recently used go past a bound; one that goes is
// destroyed once the longest call it may still carry (its timeout) has ended.
const clients = new LRUCache<string, { client: BedrockRuntimeClient; timeoutMs: number }>({
  max: 64,
  dispose: ({ client, timeoutMs }) => setTimeout(() => client.destroy(), timeoutMs + 1000).unref(),
});

function clientFor(provider: Provider, key: string, timeoutMs: number): BedrockRuntimeClient {
  const id = JSON.stringify([provider.id, provider.base_url, provider.settings.region, key, timeoutMs]);
  let client = clients.get(id)?.client;
  if (!client) {
    client = new BedrockRuntimeClient({
      endpoint: provider.base_url,
      region: String(provider.settings.region ?? ''),
      credentials: credentialsOf(key),
      maxAttempts: 1,
      retryMode: 'standard',
      authSchemePreference: ['sigv4'],
      useFipsEndpoint: false,
      useDualstackEndpoint: false,
      defaultsMode: 'standard',
      // HTTP/1.1 (the SDK's default is HTTP/2); timeouts as the gateway's other upstream calls.
      requestHandler: new NodeHttpHandler({ connectionTimeout: timeoutMs, requestTimeout: timeoutMs }),
    });
    clients.set(id, { client, timeoutMs });
  }
  return client;
}

/** The upstream body the adapter builds: the Converse input and whether to stream. */
export interface BedrockCall {
  stream: boolean;
  input: ConverseCommandInput;
}

// Bedrock's exceptions whose status the gateway's error table reads otherwise: a quota refusal is
// a rate limit (retry later), a model that failed is a provider error, not the client's request.
const STATUS_OF: Record<string, number> = { ServiceQuotaExceededException: 429, ModelErrorException: 502, ModelStreamErrorException: 502 };

async function* events(stream: AsyncIterable<ConverseStreamOutput>, requestId: string): AsyncGenerator<string> {
  for await (const ev of stream) {
    for (const [name, value] of Object.entries(ev)) {
      if (value === undefined || name === '$unknown') continue;
      // the request id rides on messageStart: the stream's id
      yield `event: ${name}\ndata: ${JSON.stringify(name === 'messageStart' ? { ...value, requestId } : value)}\n\n`;
    }
  }
}

function failure(err: unknown, opts: UpstreamOptions): UpstreamResponse {
  if (opts.signal?.aborted || (err as Error).name === 'AbortError') throw err;
  if (err instanceof BedrockRuntimeServiceException) {
    if (err.name === 'ModelTimeoutException') throw new UpstreamFailure('timeout', true, `${err.name}: ${err.message}`);
    const status = STATUS_OF[err.name] ?? err.$metadata.httpStatusCode ?? 502;
    return bufferedResponse(status, { 'x-amzn-errortype': err.name }, [JSON.stringify({ __type: err.name, message: err.message })]);
  }
  if ((err as Error).name === 'TimeoutError') throw new UpstreamFailure('timeout', true, `no answer within ${opts.timeoutMs} ms`);
  const code = (err as { code?: string }).code;
  // An answer the client could not read (not Bedrock's shape) is the provider's error; a refused connection never carried the request.
  const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (status) return bufferedResponse(status, {}, [JSON.stringify({ message: (err as Error).message })]);
  throw new UpstreamFailure('connection', code !== 'ECONNREFUSED', `connection failed (${code ?? (err as Error).message})`);
}

/** Sends a Converse or ConverseStream call, with the next key when Bedrock refuses one (403). */
export function sendBedrock(provider: Provider, call: BedrockCall, opts: UpstreamOptions): Promise<UpstreamResponse> {
  const route = `model/{modelId}/${call.stream ? 'converse-stream' : 'converse'}`;
  return sendWithKeys(provider, route, async (key) => {
    const client = clientFor(provider, key, opts.timeoutMs);
    try {
      if (call.stream) {
        const out = await client.send(new ConverseStreamCommand(call.input), { abortSignal: opts.signal });
        return bufferedResponse(200, { 'content-type': 'text/event-stream' }, events(out.stream!, out.$metadata.requestId ?? ''));
      }
      const { $metadata, ...out } = await client.send(new ConverseCommand(call.input), { abortSignal: opts.signal });
      return bufferedResponse(200, { 'content-type': 'application/json' }, [JSON.stringify({ ...out, requestId: $metadata.requestId ?? '' })]);
    } catch (err) {
      return failure(err, opts);
    }
  }, opts.keyHealth);
}
