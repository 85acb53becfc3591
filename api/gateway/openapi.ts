import { z } from 'zod';
import { gatewayErrorBody, gatewayHeaders, header, healthOperations, jsonObject, type ApiDescription, type ApiOperation } from '../shared/openapi';
import { audioModelsQuery } from './media/audio/models';
import { videoCreateSchema } from './media/videos/schema';
import { videoContentQuery } from './media/videos/read';
import { generationQuery, usageQuery } from './reads/reads';
import { chatRequestSchema } from './text/chat-schema';
import { countTokensSchema, messagesRequestSchema } from './text/messages-schema';
import { responsesRequestSchema } from './text/responses-schema';
import { embeddingsRequestSchema } from './text/embeddings';
import { SCRIPTS as INSTALLER_SCRIPTS } from './installer/routes';

/** A billed answer's headers: its request id in the ledger and, once known, what it cost. */
const billed = z.object({
  'x-gateway-request-id': header('The reservation id of this billed request (equals x-request-id)').optional(),
  'x-gateway-cost': header('Credits charged, an exact decimal string (absent while the charge is not final)').optional(),
});
/** The response cache (issue 36 part 4, docs/gateway.md "Response cache"): the opt-in per request and what answered. */
const cacheRequest = z.object({
  'x-gateway-cache': z
    .string()
    .regex(/^(ttl=([1-9]\d{0,5}|1\d{6}|2[0-4]\d{5}|25[0-8]\d{4}|259[01]\d{3}|2592000)|no-store)$/) // 1 to MAX_TTL_SECONDS
    .optional()
    .meta({ description: 'ttl=<seconds> (1 to 2592000): answer from the response cache and store the answer for that long (also for temperature > 0); no-store: bypass the cache (also the key\'s cache_ttl)' }),
});
const cached = billed.extend({
  'x-gateway-cache': z.enum(['hit', 'miss']).optional().meta({ description: 'hit: answered from the response cache (billing_source cache, charged the model\'s cache-hit price); miss: answered by a provider and stored. Absent: the request did not use the cache' }),
});
const idempotency = z.object({ 'idempotency-key': z.string().max(255).optional().meta({ description: 'Replays return the first answer; the body must be the same' }) });
const anthropicError = z
  .object({ type: z.literal('error'), error: z.object({ type: z.string(), message: z.string() }) })
  .meta({ id: 'AnthropicError', description: "The Messages dialect's errors, in Anthropic's shape" });
const list = z.looseObject({ data: z.array(jsonObject) });
const jsonOrOther = (description: string) => jsonObject.meta({ description });

/** GET / (and HEAD /): the service description (api/gateway/app.ts serviceDescription). */
export const serviceDescriptionSchema = z
  .object({
    name: z.string(),
    variant: z.enum(['credits', 'keyed']),
    version: z.string(),
    links: z.object({ models: z.string(), openapi: z.string(), docs: z.string(), health: z.string() }),
  })
  .meta({ id: 'ServiceDescription', description: 'What this service is and where to start' });

const operations: ApiOperation[] = [
  { method: 'get', path: '/', summary: 'Service description: name, variant, version and links (HEAD / answers the same headers without a body)', tags: ['health'], response: serviceDescriptionSchema, security: [] },
  { method: 'post', path: '/v1/chat/completions', summary: 'Chat completion (OpenAI dialect); `stream: true` answers server-sent events', tags: ['text'], body: chatRequestSchema, stream: true, headers: cacheRequest, responseHeaders: cached },
  { method: 'post', path: '/v1/messages', summary: 'Messages (Anthropic dialect); `stream: true` answers server-sent events', tags: ['text'], body: messagesRequestSchema, stream: true, headers: cacheRequest, responseHeaders: cached, errorBody: anthropicError },
  { method: 'post', path: '/v1/messages/count_tokens', summary: "Count a Messages request's input tokens (not billed)", tags: ['text'], body: countTokensSchema, errorBody: anthropicError },
  { method: 'post', path: '/v1/responses', summary: 'Responses (OpenAI Responses dialect); `stream: true` answers server-sent events', tags: ['text'], body: responsesRequestSchema, stream: true, headers: cacheRequest, responseHeaders: cached },
  { method: 'post', path: '/v1/embeddings', summary: 'Embeddings', tags: ['text'], body: embeddingsRequestSchema, responseHeaders: billed },
  { method: 'get', path: '/v1/credits', summary: "The account's credits", tags: ['billing'] },
  { method: 'get', path: '/v1/key', summary: 'The calling key and its limits', tags: ['billing'] },
  { method: 'get', path: '/v1/generation', summary: 'One request by its request id or answer id; data.billing_source is provider_cost, provider_cost_capped, token_fallback, estimate, complimentary, not_billed, pending, or cache (answered from the response cache)', tags: ['billing'], query: generationQuery },
  { method: 'get', path: '/v1/usage', summary: 'Settled usage by model, provider, day and key', tags: ['billing'], query: usageQuery },
  { method: 'get', path: '/v1/models', summary: 'Models this key may call', tags: ['models'], response: list },
  { method: 'get', path: '/v1/models/:id', summary: 'One model', tags: ['models'] },
  {
    method: 'post',
    path: '/v1/videos',
    summary: 'Start a video job (answers 202 with the job)',
    tags: ['media'],
    headers: idempotency,
    body: videoCreateSchema,
    status: [202, 200],
    responseHeaders: billed,
  },
  { method: 'get', path: '/v1/videos/models', summary: 'Video models', tags: ['media'], response: list },
  { method: 'get', path: '/v1/videos/:id', summary: 'A video job', tags: ['media'] },
  { method: 'get', path: '/v1/videos/:id/content', summary: "A completed job's video bytes (Range honoured)", tags: ['media'], query: videoContentQuery, status: [200, 206], responseType: 'video/mp4' },
  { method: 'post', path: '/v1/audio/speech', summary: 'Text to speech: audio bytes (mp3 or pcm)', tags: ['media'], headers: idempotency, body: jsonOrOther('model, input, voice, response_format (mp3|pcm), speed, input_references'), responseType: 'application/octet-stream', responseHeaders: billed },
  {
    method: 'post',
    path: '/v1/audio/transcriptions',
    summary: 'Transcription: multipart with `file`, or JSON with `input_audio`',
    tags: ['media'],
    headers: idempotency,
    body: z.object({ file: z.string().meta({ format: 'binary' }), model: z.string() }).meta({ description: 'multipart/form-data; JSON with input_audio is also accepted' }),
    bodyType: 'multipart/form-data',
    stream: true,
    responseHeaders: billed,
  },
  { method: 'get', path: '/v1/audio/models', summary: 'Audio models', tags: ['media'], query: audioModelsQuery, response: list },
  { method: 'post', path: '/v1/images', summary: 'Generate images', tags: ['media'], headers: idempotency, body: jsonOrOther('model, prompt, n, size, … (spec 1 section 4.1)'), stream: true, responseHeaders: billed },
  { method: 'post', path: '/v1/images/generations', summary: 'Generate images (OpenAI path)', tags: ['media'], headers: idempotency, body: jsonOrOther('model, prompt, n, size, … (spec 1 section 4.1)'), stream: true, responseHeaders: billed },
  {
    method: 'post',
    path: '/v1/images/edits',
    summary: 'Edit images (multipart: image[] and text fields)',
    tags: ['media'],
    headers: idempotency,
    body: z.object({ image: z.string().meta({ format: 'binary' }), model: z.string(), prompt: z.string() }),
    bodyType: 'multipart/form-data',
    stream: true,
    responseHeaders: billed,
  },
  { method: 'get', path: '/v1/images/models', summary: 'Image models', tags: ['media'], response: list },
  ...INSTALLER_SCRIPTS.map((name): ApiOperation => ({ method: 'get', path: `/${name}`, summary: `The ${name} installer script`, tags: ['installer'], responseType: 'text/plain', security: [] })),
  ...healthOperations,
];

/** The gateway's /v1 API for one variant (spec 1 `credits`, spec 3 A `keyed`), at /openapi.json on its port. */
export const gatewayApi = (variant: 'credits' | 'keyed'): ApiDescription => ({
  title: `Inference gateway (${variant} variant)`,
  version: '1',
  description:
    variant === 'keyed'
      ? 'OpenAI- and Anthropic-compatible inference with per-key spend limits (mt- keys). Every failure answers in the error envelope; /v1/messages in Anthropic\'s.'
      : 'OpenAI- and Anthropic-compatible inference billed against account credits (gw_ai_/rk_live_ keys). Every failure answers in the error envelope; /v1/messages in Anthropic\'s.',
  securitySchemes: {
    bearer: { type: 'http', scheme: 'bearer', description: variant === 'keyed' ? 'An mt- key' : 'A gw_ai_ or rk_live_ key' },
    xApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    ...(variant === 'credits' ? { apiKey: { type: 'apiKey', in: 'header', name: 'api-key' } } : {}),
  },
  security: variant === 'credits' ? ['bearer', 'xApiKey', 'apiKey'] : ['bearer', 'xApiKey'],
  errorBody: gatewayErrorBody,
  headers: gatewayHeaders,
  operations,
});
