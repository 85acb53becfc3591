import { z } from 'zod';
import { REASONING_EFFORTS } from '../../../providers/canonical';
import { byType, typed } from './zod-kit';
import { routingFields } from './routing-schema';

// The OpenAI chat-completions request as the vendor accepts it (the openai SDK's
// ChatCompletionCreateParams): every top-level name, message role, content part and tool type is
// known by name, so an unknown one is refused while every vendor one passes
// (test/gateway/sdk-schemas-openai.test.ts). Natively it passes on unchanged.

const str = z.string();
const record = z.record(z.string(), z.unknown());

const contentPart = byType({
  text: typed('text', { text: str }),
  image_url: typed('image_url', { image_url: z.object({ url: str }).loose() }),
  input_audio: typed('input_audio'),
  file: typed('file'),
  refusal: typed('refusal', { refusal: str }),
});

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: z.union([str, z.array(contentPart), z.null()]).optional(),
  })
  .loose();

const tool = byType({
  function: typed('function', { function: z.object({ name: str.min(1) }).loose() }),
  custom: typed('custom', { custom: z.object({ name: str.min(1) }).loose() }),
});

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  byType({
    function: typed('function', { function: z.object({ name: str }).loose() }),
    custom: typed('custom', { custom: z.object({ name: str }).loose() }),
    allowed_tools: typed('allowed_tools', { allowed_tools: z.object({ mode: z.enum(['auto', 'required']), tools: z.array(record) }).loose() }),
  }),
]);

/** OpenAI chat-completions request; unknown top-level fields are rejected by name. */
export const chatRequestSchema = z
  .object({
    model: str.min(1),
    messages: z.array(message).min(1),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).strict().nullish(),
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().min(0).max(1).nullish(),
    n: z.number().int().min(1).max(128).nullish(),
    stop: z.union([str, z.array(str).max(4)]).nullish(),
    presence_penalty: z.number().min(-2).max(2).nullish(),
    frequency_penalty: z.number().min(-2).max(2).nullish(),
    logit_bias: z.record(z.string(), z.number()).nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    user: str.optional(),
    seed: z.number().int().nullish(),
    tools: z.array(tool).optional(),
    tool_choice: toolChoice.optional(),
    parallel_tool_calls: z.boolean().optional(),
    // deprecated by OpenAI for tools / tool_choice, still accepted
    functions: z.array(z.object({ name: str.min(1) }).loose()).optional(),
    function_call: z.union([z.enum(['none', 'auto']), z.object({ name: str }).loose()]).optional(),
    response_format: z.object({ type: z.enum(['text', 'json_object', 'json_schema']) }).loose().optional(),
    modalities: z.array(z.enum(['text', 'audio'])).nullish(),
    audio: z.object({ voice: z.union([str, z.object({ id: str }).loose()]), format: z.enum(['wav', 'mp3', 'flac', 'opus', 'aac', 'pcm16']) }).strict().nullish(),
    prediction: z.object({ type: z.literal('content'), content: z.union([str, z.array(contentPart)]) }).loose().nullish(),
    web_search_options: record.optional(),
    reasoning_effort: z.enum(REASONING_EFFORTS).nullish(),
    verbosity: z.enum(['low', 'medium', 'high']).nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    store: z.boolean().nullish(),
    service_tier: str.nullish(),
    prompt_cache_key: str.nullish(),
    prompt_cache_retention: z.enum(['in_memory', '24h']).nullish(),
    prompt_cache_options: record.optional(),
    safety_identifier: str.nullish(),
    moderation: record.nullish(),
    ...routingFields,
  })
  .strict();

export type ChatRequest = z.infer<typeof chatRequestSchema>;

/**
 * Upper bound of prompt tokens besides audio: a token is at least one byte; images count a fixed
 * budget. Audio clips are bounded by their duration (dialects/chat-audio.ts), so their base64
 * bytes are left out.
 */
export function promptTokenBound(req: ChatRequest): number {
  let images = 0;
  let audioData = 0;
  for (const m of req.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const p of m.content) {
      if (p.type === 'image_url') images++;
      else if (p.type === 'input_audio') audioData += Buffer.byteLength(JSON.stringify((p.input_audio as { data?: unknown } | undefined)?.data ?? ''));
    }
  }
  const text = JSON.stringify(req.messages) + (req.tools ? JSON.stringify(req.tools) : '');
  return Buffer.byteLength(text) - audioData + images * 2000;
}

/** A plausible prompt size for a cancelled stream, where the provider never said. */
export function promptTokenEstimate(req: ChatRequest): number {
  let chars = 0;
  for (const m of req.messages) {
    if (typeof m.content === 'string') chars += m.content.length;
    else if (Array.isArray(m.content)) for (const p of m.content) if (typeof p.text === 'string') chars += p.text.length;
  }
  return Math.ceil(chars / 4) + 4 * req.messages.length;
}
