import { z } from 'zod';

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough()), z.null()]).optional(),
  })
  .passthrough();

/** OpenAI chat-completions request; unknown top-level fields are rejected by name. */
export const chatRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(message).min(1),
    stream: z.boolean().optional(),
    stream_options: z.object({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).strict().nullable().optional(),
    max_tokens: z.number().int().positive().nullable().optional(),
    max_completion_tokens: z.number().int().positive().nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    top_p: z.number().min(0).max(1).nullable().optional(),
    n: z.literal(1).nullable().optional(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
    presence_penalty: z.number().min(-2).max(2).nullable().optional(),
    frequency_penalty: z.number().min(-2).max(2).nullable().optional(),
    logit_bias: z.record(z.string(), z.number()).nullable().optional(),
    logprobs: z.boolean().nullable().optional(),
    top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
    user: z.string().optional(),
    seed: z.number().int().nullable().optional(),
    tools: z.array(z.object({ type: z.string() }).passthrough()).optional(),
    tool_choice: z.union([z.string(), z.object({}).passthrough()]).optional(),
    parallel_tool_calls: z.boolean().optional(),
    response_format: z.object({ type: z.enum(['text', 'json_object', 'json_schema']) }).passthrough().optional(),
    modalities: z.array(z.enum(['text', 'audio'])).nullable().optional(),
    audio: z.object({ voice: z.string(), format: z.enum(['wav', 'mp3', 'flac', 'opus', 'aac', 'pcm16']) }).strict().nullable().optional(),
    reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(),
    metadata: z.record(z.string(), z.string()).nullable().optional(),
    store: z.boolean().nullable().optional(),
    service_tier: z.string().nullable().optional(),
    prompt_cache_key: z.string().optional(),
    safety_identifier: z.string().optional(),
    verbosity: z.enum(['low', 'medium', 'high']).nullable().optional(),
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
