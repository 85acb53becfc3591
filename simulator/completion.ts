// Pure part of chat completions: request validation and the deterministic answer plan.
// Streaming and non-streaming share the plan, so the same request always yields the same
// token numbers in both modes.
import type { Behaviour } from './behaviour';

export interface ChatRequest {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  /** Text of every message joined by newlines; where `[sim ...]` directives are looked for. */
  allText: string;
  lastUserText: string;
  promptTokens: number;
}

export type ChatParse = { ok: true; request: ChatRequest } | { ok: false; message: string; param: string };

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
  cost?: number;
}

export interface Plan {
  /** One entry per visible completion token; joined with single spaces they form the reply. */
  pieces: string[];
  finishReason: 'stop' | 'length';
  usage: Usage;
}

const DEFAULT_TOKENS = 16;
const DEFAULT_MAX_TOKENS = 64;
const DEFAULT_REASONING = 8;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Text of a message's content: a string, or the `text` parts of an array (images etc. count zero). */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) return null;
  let out = '';
  for (const part of content) {
    if (isRecord(part) && typeof part.text === 'string') out += part.text;
  }
  return out;
}

function tokenLimit(body: Record<string, unknown>): number | undefined | string {
  for (const param of ['max_completion_tokens', 'max_tokens']) {
    const value = body[param];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) return param;
    return value;
  }
  return undefined;
}

/** Lenient extraction of the fields /_sim/stats reports, for any parsed body (valid or not). */
export function describeBody(body: unknown): { model: string | null; stream: boolean; include_usage: boolean } {
  if (!isRecord(body)) return { model: null, stream: false, include_usage: false };
  const options = body.stream_options;
  return {
    model: typeof body.model === 'string' ? body.model : null,
    stream: body.stream === true,
    include_usage: isRecord(options) && options.include_usage === true,
  };
}

export function parseChatRequest(body: unknown): ChatParse {
  if (!isRecord(body)) return { ok: false, message: 'Request body must be a JSON object.', param: 'body' };
  const { model, messages } = body;
  if (typeof model !== 'string' || model.length === 0) {
    return { ok: false, message: "Missing required parameter: 'model'.", param: 'model' };
  }
  if (!Array.isArray(messages) || messages.length === 0) {
    return { ok: false, message: "Missing required parameter: 'messages'.", param: 'messages' };
  }
  const texts: string[] = [];
  let lastUserText: string | undefined;
  let chars = 0;
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i];
    const text = isRecord(message) ? contentText(message.content) : null;
    if (text === null) return { ok: false, message: `Invalid message at index ${i}.`, param: `messages[${i}]` };
    texts.push(text);
    chars += text.length;
    if (isRecord(message) && message.role === 'user') lastUserText = text;
  }
  const limit = tokenLimit(body);
  if (typeof limit === 'string') {
    return { ok: false, message: `'${limit}' must be a positive integer.`, param: limit };
  }
  const described = describeBody(body);
  return {
    ok: true,
    request: {
      model,
      stream: described.stream,
      includeUsage: described.include_usage,
      maxTokens: limit,
      allText: texts.join('\n'),
      lastUserText: lastUserText ?? texts[texts.length - 1] ?? '',
      // Deterministic stand-in for a tokenizer: ~4 characters a token plus 4 per message.
      promptTokens: Math.ceil(chars / 4) + 4 * messages.length,
    },
  };
}

function firstWords(text: string, max: number): string[] {
  const words: string[] = [];
  const re = /\S+/g;
  let match: RegExpExecArray | null;
  while (words.length < max && (match = re.exec(text)) !== null) words.push(match[0]);
  return words;
}

/** cost=auto: $1 per million prompt tokens, $2 per million completion tokens, in exact nano-dollars. */
export function autoCost(promptTokens: number, completionTokens: number): number {
  return (promptTokens * 1000 + completionTokens * 2000) / 1e9;
}

export function planCompletion(request: ChatRequest, behaviour: Behaviour): Plan {
  const wanted = behaviour.tokens ?? DEFAULT_TOKENS;
  const limit = request.maxTokens ?? DEFAULT_MAX_TOKENS;
  const visible = Math.min(wanted, limit);

  // "Echo:" followed by the words of the last user message, cycled until long enough.
  const base = ['Echo:', ...firstWords(request.lastUserText, visible - 1)];
  const pieces: string[] = new Array<string>(visible);
  for (let i = 0; i < visible; i++) pieces[i] = base[i % base.length] ?? '';

  // Reasoner models always think; other models only when the control asks for it.
  const reasoning = request.model.includes('reasoner') ? (behaviour.reasoning ?? DEFAULT_REASONING) : behaviour.reasoning;
  const completion = visible + (reasoning ?? 0);
  const usage: Usage = {
    prompt_tokens: request.promptTokens,
    completion_tokens: completion,
    total_tokens: request.promptTokens + completion,
    prompt_tokens_details: { cached_tokens: behaviour.cached ?? 0, cache_write_tokens: behaviour.cache_write ?? 0 },
  };
  if (reasoning !== undefined) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  if (behaviour.cost !== undefined) {
    usage.cost = behaviour.cost === 'auto' ? autoCost(request.promptTokens, completion) : behaviour.cost;
  }
  return { pieces, finishReason: wanted > limit ? 'length' : 'stop', usage };
}
