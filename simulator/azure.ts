// POST /openai/deployments/{deployment}/chat/completions?api-version=…: Azure OpenAI's chat
// completions, OpenAI's body and answer (simulator/chat.ts) plus Azure's content-filter results,
// its `api-key` header and its own error bodies for auth, routing and rate limits.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeBody, parseChatRequest, type ChatRequest } from './completion';
import type { Dialect, Failure } from './endpoint';
import { serveChat, type ChatFlavour } from './chat';
import { bearerKey, sendError, sendJson } from './http';
import type { SimState } from './state';
import { isRecord } from './text';

const API_VERSION = /^\d{4}-\d{2}-\d{2}(-preview)?$/;

const ACCESS_DENIED = 'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.';

const SAFE = { filtered: false, severity: 'safe' };
const FILTERS = { hate: SAFE, self_harm: SAFE, sexual: SAFE, violence: SAFE };
const AZURE: ChatFlavour = {
  head: { prompt_filter_results: [{ prompt_index: 0, content_filter_results: FILTERS }] },
  choice: { content_filter_results: FILTERS },
};

/** `api-key`, else an Entra ID `Authorization: Bearer` token. */
function azureKey(req: IncomingMessage): string | null {
  const header = req.headers['api-key'];
  const key = (Array.isArray(header) ? header[0] : header)?.trim();
  return key ? key : bearerKey(req);
}

function failAzure(version: string) {
  return (res: ServerResponse, f: Failure): void => {
    if (f.reason === 'rejected_key') return sendJson(res, 401, { error: { code: '401', message: ACCESS_DENIED } });
    if (f.reason === 'simulated' && f.status === 429) {
      const message = `Requests to the ChatCompletions_Create Operation under Azure OpenAI API version ${version} have exceeded token rate limit of your current tier. Please retry after 1 second.`;
      return sendJson(res, 429, { error: { code: f.errorCode ?? '429', message } }, f.headers);
    }
    // Everything else as OpenAI's body, which Azure passes on.
    sendError(res, f.status, f.message, { code: f.code, param: f.param, headers: f.headers });
  };
}

function azureDialect(deployment: string, version: string): Dialect<ChatRequest> {
  return {
    endpoint: '/openai/deployments/{deployment}/chat/completions',
    key: azureKey,
    describe: (body) => ({ ...describeBody(body), model: deployment }),
    // The deployment names the model: a body's `model` is not needed (and not used).
    parse: (body) => parseChatRequest(isRecord(body) ? { ...body, model: deployment } : body),
    fail: failAzure(version),
  };
}

export function serveAzureChat(req: IncomingMessage, res: ServerResponse, state: SimState, deployment: string, query: URLSearchParams): Promise<void> | void {
  const version = query.get('api-version');
  if (version === null) {
    req.resume();
    return sendJson(res, 404, { error: { code: '404', message: 'Resource not found' } });
  }
  if (!API_VERSION.test(version)) {
    req.resume();
    return sendJson(res, 400, { error: { code: 'BadRequest', message: 'API version not supported' } });
  }
  if (azureKey(req) === null) {
    req.resume();
    return sendJson(res, 401, { error: { code: '401', message: ACCESS_DENIED } });
  }
  return serveChat(req, res, state, azureDialect(deployment, version), AZURE);
}
