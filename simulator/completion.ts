// Pure part of every completion endpoint: the format-neutral request, chat-completions request
// validation, and the deterministic answer plan. Streaming and non-streaming share the plan,
// so the same request always yields the same token numbers in both modes, in every format.
import type { Behaviour } from './behaviour';
import { base64Bytes, type SpokenFormat } from './media-bytes';
import { afterLastDirective, cycle, firstWords, isRecord, partsText, stripDirectives } from './text';

/** What every wire format's parser extracts; the plan depends on nothing else. */
export interface GenRequest {
  model: string;
  /** Cap on visible completion tokens (max_tokens and its per-format equivalents). */
  maxTokens: number | undefined;
  /** Text of every message joined by newlines; where `[sim ...]` directives are looked for. */
  allText: string;
  lastUserText: string;
  promptTokens: number;
  /** Text of the tool result(s) ending the conversation, or null when it does not end with one. */
  toolResult: string | null;
  /** Names of the declared function tools. */
  tools: string[];
  /** Stop strings (empty ones already removed). */
  stop: string[];
  /** Chat with a model whose name contains `audio`: its audio in and out; absent otherwise. */
  audio?: ChatAudio;
}

export interface ChatAudio {
  /** Audio tokens of the input_audio clips. */
  inputTokens: number;
  /** The format of the spoken answer asked for with `modalities` holding `audio`, else null. */
  output: SpokenFormat | null;
}

export interface ChatRequest extends GenRequest {
  stream: boolean;
  includeUsage: boolean;
}

export type ChatParse = { ok: true; request: ChatRequest } | { ok: false; message: string; param: string };

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; cache_write_tokens: number; audio_tokens?: number; text_tokens?: number };
  completion_tokens_details?: { reasoning_tokens: number; audio_tokens?: number; text_tokens?: number };
  cost?: number;
}

export interface PlannedToolCall {
  name: string;
  /** JSON text `{"input":"..."}` (`tool_arg=KEY`: `{"KEY":"..."}`). */
  arguments: string;
  /** The arguments cut after each whitespace run; one fragment is one completion token. */
  fragments: string[];
}

export interface Plan {
  /** One entry per visible completion token; joined with single spaces they form the reply. */
  pieces: string[];
  /** Set instead of text when the answer is a tool call (then `pieces` is empty). */
  toolCall: PlannedToolCall | null;
  finishReason: 'stop' | 'length' | 'tool_calls';
  /** The stop string that cut the text, if one did. */
  stopSequence: string | null;
  /** Reasoning tokens (0 when the model does not reason); `usage` reports them the chat way. */
  reasoningTokens: number;
  /** Chat audio output: `pieces` are the transcript, each word spoken in this format. */
  spoken: SpokenFormat | null;
  /** Chat-completions usage; the other formats derive theirs from it. */
  usage: Usage;
}

const DEFAULT_TOKENS = 16;
const DEFAULT_MAX_TOKENS = 64;
const DEFAULT_REASONING = 8;
/** Input audio: seconds = bytes / 16,000 (as transcription), 10 tokens a second. */
const AUDIO_BYTES_PER_SECOND = 16_000;
const AUDIO_INPUT_TOKENS_PER_SECOND = 10;
/** Output audio: 3 tokens a spoken word (240 ms, so 12.5 a second). */
const AUDIO_TOKENS_PER_WORD = 3;
const AUDIO_FORMATS = ['wav', 'mp3', 'flac', 'opus', 'aac', 'pcm16'];
const SPOKEN_FORMATS: readonly string[] = ['wav', 'mp3', 'pcm16'] satisfies SpokenFormat[];

/** Text of a message's content: a string, or the `text` parts of an array (images etc. count zero). */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (!Array.isArray(content)) return null;
  return partsText(content);
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

/** Chat `stop`: a string or an array of strings. Anything else is ignored, as it always was. */
function chatStop(value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  return list.filter((s): s is string => typeof s === 'string' && s.length > 0);
}

/** Names of `tools: [{ type: 'function', function: { name } }]`; malformed entries are ignored. */
function chatTools(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  const names: string[] = [];
  for (const tool of value) {
    if (isRecord(tool) && isRecord(tool.function) && typeof tool.function.name === 'string') names.push(tool.function.name);
  }
  return names;
}

type AudioParse = { ok: true; audio: ChatAudio } | { ok: false; message: string; param: string };

/**
 * Audio of a chat request. Only models whose name contains `audio` take it (as only OpenAI's
 * audio models do); the clips are counted, the spoken answer's format checked.
 */
function chatAudio(body: Record<string, unknown>, messages: unknown[], model: string): AudioParse | null {
  const audioModel = model.includes('audio');
  let inputTokens = 0;
  for (const [i, message] of messages.entries()) {
    const parts = isRecord(message) && Array.isArray(message.content) ? message.content : [];
    for (const [j, part] of parts.entries()) {
      if (!isRecord(part) || part.type !== 'input_audio') continue;
      const param = `messages[${i}].content[${j}].input_audio`;
      if (!audioModel) return { ok: false, message: `Invalid content type: 'input_audio' is not supported by model '${model}'.`, param: `messages[${i}].content[${j}].type` };
      const audio = part.input_audio;
      if (!isRecord(audio) || typeof audio.data !== 'string' || typeof audio.format !== 'string') {
        return { ok: false, message: `Missing required parameter: '${param}' ({ data, format }).`, param };
      }
      const bytes = base64Bytes(audio.data);
      if (!bytes) return { ok: false, message: `Invalid '${param}.data': the audio is empty or not base64.`, param: `${param}.data` };
      inputTokens += Math.ceil((bytes / AUDIO_BYTES_PER_SECOND) * AUDIO_INPUT_TOKENS_PER_SECOND);
    }
  }
  const modalities = body.modalities;
  const spoken = Array.isArray(modalities) && modalities.includes('audio');
  if (spoken && !audioModel) return { ok: false, message: `Model '${model}' does not support audio output.`, param: 'modalities' };
  if (!audioModel) return null;
  if (!spoken) return { ok: true, audio: { inputTokens, output: null } };
  const audio = body.audio;
  if (!isRecord(audio)) return { ok: false, message: "Missing required parameter: 'audio' (needed with modalities ['text', 'audio']).", param: 'audio' };
  if (typeof audio.voice !== 'string') return { ok: false, message: "Missing required parameter: 'audio.voice'.", param: 'audio.voice' };
  const format = audio.format;
  if (typeof format !== 'string' || !AUDIO_FORMATS.includes(format)) {
    return { ok: false, message: `Invalid value for 'audio.format': one of ${AUDIO_FORMATS.join(', ')}.`, param: 'audio.format' };
  }
  if (!SPOKEN_FORMATS.includes(format)) {
    return { ok: false, message: `Unsupported value: 'audio.format' does not support '${format}'. Supported values are: 'wav', 'mp3' and 'pcm16'.`, param: 'audio.format' };
  }
  return { ok: true, audio: { inputTokens, output: format as SpokenFormat } };
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
  // Text of the trailing run of role 'tool' messages.
  let toolResults: string[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i];
    const text = isRecord(message) ? contentText(message.content) : null;
    if (text === null) return { ok: false, message: `Invalid message at index ${i}.`, param: `messages[${i}]` };
    texts.push(text);
    chars += text.length;
    if (isRecord(message) && message.role === 'user') lastUserText = text;
    if (isRecord(message) && message.role === 'tool') toolResults.push(text);
    else if (toolResults.length > 0) toolResults = [];
  }
  const limit = tokenLimit(body);
  if (typeof limit === 'string') {
    return { ok: false, message: `'${limit}' must be a positive integer.`, param: limit };
  }
  const audio = chatAudio(body, messages, model);
  if (audio && !audio.ok) return audio;
  const described = describeBody(body);
  return {
    ok: true,
    request: {
      ...(audio ? { audio: audio.audio } : {}),
      model,
      stream: described.stream,
      includeUsage: described.include_usage,
      maxTokens: limit,
      allText: texts.join('\n'),
      lastUserText: lastUserText ?? texts[texts.length - 1] ?? '',
      // Deterministic stand-in for a tokenizer: ~4 characters a token plus 4 per message.
      promptTokens: Math.ceil(chars / 4) + 4 * messages.length + (audio ? audio.audio.inputTokens : 0),
      toolResult: toolResults.length > 0 ? toolResults.join('\n') : null,
      tools: chatTools(body.tools),
      stop: chatStop(body.stop),
    },
  };
}

/** cost=auto: $1 per million prompt tokens, $2 per million completion tokens, in exact nano-dollars. */
export function autoCost(promptTokens: number, completionTokens: number): number {
  return (promptTokens * 1000 + completionTokens * 2000) / 1e9;
}

/** The tool `tool_call` asks for, or null when the answer is text. A tool result always gets text. */
function wantedTool(request: GenRequest, behaviour: Behaviour): string | null {
  return behaviour.tool_call !== undefined && request.toolResult === null ? behaviour.tool_call : null;
}

/** Error message when `tool_call` names a tool the request does not declare, else null. */
export function toolCallError(request: GenRequest, behaviour: Behaviour): string | null {
  const name = wantedTool(request, behaviour);
  if (name === null || request.tools.includes(name)) return null;
  return `simulator control tool_call='${name}' names a tool the request does not declare`;
}

/** Cuts the text before the earliest stop string, if any occurs. */
function applyStop(pieces: string[], stop: readonly string[]): { pieces: string[]; sequence: string } | null {
  if (stop.length === 0) return null;
  const text = pieces.join(' ');
  let at = -1;
  let sequence = '';
  for (const s of stop) {
    const i = text.indexOf(s);
    if (i !== -1 && (at === -1 || i < at)) {
      at = i;
      sequence = s;
    }
  }
  if (at === -1) return null;
  return { pieces: text.slice(0, at).split(' ').filter((w) => w.length > 0), sequence };
}

/** `count` words of reasoning text: "Thinking:" and the last user message's words, cycled. */
export function reasoningWords(request: GenRequest, count: number): string[] {
  return cycle(['Thinking:', ...firstWords(request.lastUserText, count - 1)], count);
}

// `{"input": <the last user message>}`; with tool_arg=KEY `{"KEY": <the text after the directive>}`,
// so a real tool gets a usable argument (`[sim tool_call=Bash tool_arg=command] echo hi`) even when
// the client put context of its own before the prompt in the same message.
function planToolCall(request: GenRequest, name: string, argName: string | undefined): PlannedToolCall {
  const text = argName === undefined ? request.lastUserText : afterLastDirective(request.lastUserText);
  const args = JSON.stringify({ [argName ?? 'input']: stripDirectives(text) });
  return { name, arguments: args, fragments: args.match(/\S+\s*/g) ?? [args] };
}

export function planCompletion(request: GenRequest, behaviour: Behaviour): Plan {
  const toolName = wantedTool(request, behaviour);
  let pieces: string[] = [];
  let toolCall: PlannedToolCall | null = null;
  let finishReason: Plan['finishReason'];
  let stopSequence: string | null = null;
  let visible: number;
  // A tool call is never spoken (as OpenAI answers it without audio).
  const spoken = toolName === null ? (request.audio?.output ?? null) : null;
  if (toolName !== null) {
    // A tool call ignores tokens/max_tokens: one token per word of the arguments JSON.
    toolCall = planToolCall(request, toolName, behaviour.tool_arg);
    finishReason = 'tool_calls';
    visible = toolCall.fragments.length;
  } else {
    const wanted = behaviour.tokens ?? DEFAULT_TOKENS;
    // Spoken, the limit covers every word's text token and its audio tokens.
    const limit = Math.floor((request.maxTokens ?? DEFAULT_MAX_TOKENS) / (spoken ? 1 + AUDIO_TOKENS_PER_WORD : 1));
    visible = Math.min(wanted, limit);
    // "Echo:" followed by the words of the last user message (or "Tool said:" and the tool
    // result when the conversation ends with one), cycled until long enough.
    const base =
      request.toolResult !== null
        ? ['Tool', 'said:', ...firstWords(request.toolResult, visible - 2)]
        : ['Echo:', ...firstWords(request.lastUserText, visible - 1)];
    pieces = cycle(base, visible);
    finishReason = wanted > limit ? 'length' : 'stop';
    const cut = applyStop(pieces, request.stop);
    if (cut) {
      pieces = cut.pieces;
      visible = pieces.length;
      finishReason = 'stop';
      stopSequence = cut.sequence;
    }
  }

  // Reasoner models always think; other models only when the control asks for it.
  const reasoning = request.model.includes('reasoner') ? (behaviour.reasoning ?? DEFAULT_REASONING) : behaviour.reasoning;
  const audioOut = spoken ? AUDIO_TOKENS_PER_WORD * visible : 0;
  const completion = visible + audioOut + (reasoning ?? 0);
  const usage: Usage = {
    prompt_tokens: request.promptTokens,
    completion_tokens: completion,
    total_tokens: request.promptTokens + completion,
    prompt_tokens_details: { cached_tokens: behaviour.cached ?? 0, cache_write_tokens: behaviour.cache_write ?? 0 },
  };
  if (reasoning !== undefined) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  if (request.audio) {
    // Audio models split both counts into audio and text, as OpenAI's do.
    const audioIn = request.audio.inputTokens;
    usage.prompt_tokens_details = { ...usage.prompt_tokens_details, audio_tokens: audioIn, text_tokens: request.promptTokens - audioIn };
    usage.completion_tokens_details = { reasoning_tokens: reasoning ?? 0, audio_tokens: audioOut, text_tokens: visible };
  }
  if (behaviour.cost !== undefined) {
    usage.cost = behaviour.cost === 'auto' ? autoCost(request.promptTokens, completion) : behaviour.cost;
  }
  return { pieces, toolCall, finishReason, stopSequence, reasoningTokens: reasoning ?? 0, spoken, usage };
}
