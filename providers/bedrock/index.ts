import type { ConverseResponse } from '@aws-sdk/client-bedrock-runtime';
import type { UpstreamAdapter } from '../canonical';
import type { ProviderConfig } from '../endpoints';
import { sendBedrock, type BedrockCall } from './client';
import { converseInput, converseResponse, converseStreamParser } from './converse';

// Amazon Bedrock's Converse API (chat only): every client dialect is translated, as no client
// speaks Converse. Sent by the official client (client.ts); registered in providers/index.ts.

const bedrockChat: UpstreamAdapter = {
  native: null,
  // SigV4 signs each call with the key's credentials: no header carries a key
  authHeaders: () => ({}),
  // the Converse path, as the client posts it (named in metrics and traces); send() does the call
  path: (_provider, upstreamModel, stream) => `model/${encodeURIComponent(upstreamModel)}/${stream ? 'converse-stream' : 'converse'}`,
  request: (req, upstreamModel, stream) => ({ stream, input: converseInput(req, upstreamModel) }) satisfies BedrockCall,
  send: (provider, body, opts) => sendBedrock(provider, body as unknown as BedrockCall, opts),
  response: (json, stop = []) => converseResponse(json as ConverseResponse & { requestId?: string }, stop),
  streamParser(stop = []) {
    const parse = converseStreamParser(stop);
    return (ev) => (ev.event && ev.data ? parse(ev.event, JSON.parse(ev.data) as Record<string, unknown>) : []);
  },
  errorMessage: (json) => (json as { message?: string } | null)?.message ?? null,
};

// AWS's shapes: regions like us-east-1 or us-gov-west-1; access key ids of 16-128 word characters
// (AKIA… long-term, ASIA… temporary); secrets and session tokens base64-like.
const REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;
const KEY = /^[A-Z0-9]{16,128}:[A-Za-z0-9/+=]{16,128}(:[A-Za-z0-9/+=]{16,})?$/;

export const bedrock: ProviderConfig = {
  authHeaders: bedrockChat.authHeaders,
  checkSettings({ region, apiKeys }) {
    const issues: Array<{ field: string; message: string }> = [];
    if (region === undefined) issues.push({ field: 'region', message: 'a bedrock provider needs the AWS region it calls (e.g. us-east-1)' });
    else if (!REGION.test(region)) issues.push({ field: 'region', message: 'not an AWS region name (e.g. us-east-1)' });
    if (!apiKeys.length) issues.push({ field: 'api-keys', message: 'a bedrock provider needs credentials: ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN], comma-separated' });
    apiKeys.forEach((k, i) => {
      if (!KEY.test(k)) issues.push({ field: 'api-keys', message: `entry ${i + 1} is not ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] (an access key id of 16-128 capitals and digits, a secret of 16-128 base64 characters)` });
    });
    return issues;
  },
  chat: bedrockChat,
};
