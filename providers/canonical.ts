import type { Provider } from '../domain/catalog/model';
import type { TokenUsage } from '../domain/credits/pricing';
import type { UpstreamOptions, UpstreamResponse } from './upstream';

// The gateway's own shape of a text request, answer and stream. Client dialects translate into
// and out of it; upstream adapters translate it to and from their wire format.

export type Dialect = 'chat' | 'messages' | 'responses';

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'stop_sequence';

export type Part = { type: 'text'; text: string } | { type: 'image'; url: string } | { type: 'audio'; data: string; format: string };

export interface ToolCall {
  id: string;
  name: string;
  /** JSON text, as the model produced it */
  arguments: string;
}

export type Message =
  | { role: 'system'; text: string }
  | { role: 'user'; parts: Part[] }
  | { role: 'assistant'; parts: Part[]; toolCalls: ToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

export interface Tool {
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

export const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface CanonicalRequest {
  messages: Message[];
  maxTokens: number | null;
  temperature?: number;
  topP?: number;
  stop: string[];
  tools: Tool[];
  toolChoice?: ToolChoice;
  /** OpenAI's effort scale (chat `reasoning_effort`, responses `reasoning.effort`) */
  reasoningEffort?: ReasoningEffort;
  /** JSON-schema output constraint, when the client asked for one */
  jsonSchema?: { name: string; schema: Record<string, unknown>; strict?: boolean };
  user?: string;
  /**
   * Request fields the translation could not carry (no equivalent in the canonical form or the
   * upstream's format), by the client's name; filled by the dialect's `toCanonical` and by the
   * upstream adapter's `request`, reported to the client in `x-gateway-ignored-params`.
   */
  ignored: string[];
}

export interface UpstreamUsage {
  tokens: TokenUsage;
  /** provider cost in its currency, as reported */
  cost: string | null;
  /** the provider's own usage object, shown as is when the client speaks the provider's dialect */
  raw: Record<string, unknown>;
}

export interface CanonicalResponse {
  id: string;
  model: string;
  created: number;
  text: string;
  reasoning: string;
  toolCalls: ToolCall[];
  finish: FinishReason;
  stopSequence: string | null;
  usage: UpstreamUsage | null;
}

export type StreamEvent =
  | { type: 'start'; id: string; model: string }
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; index: number; id: string; name: string }
  | { type: 'tool_args'; index: number; fragment: string }
  /** spoken answer (chat audio output): a piece of the transcript and/or audio bytes */
  | { type: 'audio'; transcript: string; bytes: number }
  | { type: 'finish'; reason: FinishReason; stopSequence: string | null }
  | { type: 'usage'; usage: UpstreamUsage };

export interface SseEvent {
  raw: string;
  data: string | null;
  event: string | null;
}

/** One folder per upstream wire format implements this (providers/openai, anthropic, bedrock, gemini, azure-openai). */
export type UpstreamAdapter = AdapterBody & (({ native: Dialect } & NativeDialect) | { native: null; nativeRequest?: undefined; nativeHeaders?: undefined });

/** What an upstream with a client dialect of its own adds: such requests pass through untranslated. */
interface NativeDialect {
  /** client headers that go with a native request (Anthropic's `anthropic-beta`) */
  nativeHeaders?: string[];
  /** the client's own body, for the native dialect: model id mapped, usage reporting turned on */
  nativeRequest(body: Record<string, unknown>, upstreamModel: string, stream: boolean): Record<string, unknown>;
  /** usage and provider cost of a native response body; null when none was reported */
  usage(json: unknown): UpstreamUsage | null;
}

interface AdapterBody {
  /** the path the request is posted to, relative to the provider's base URL (some formats name the model or the stream there) */
  path(provider: Provider, upstreamModel: string, stream: boolean): string;
  /** for a kind whose official client does its own HTTP (Bedrock's signing and framing): called instead of posting to `path` */
  send?(provider: Provider, body: Record<string, unknown>, opts: UpstreamOptions): Promise<UpstreamResponse>;
  authHeaders(key: string): Record<string, string>;
  request(req: CanonicalRequest, upstreamModel: string, stream: boolean): Record<string, unknown>;
  /** `stop`: the request's stop sequences, for formats that do not say which one matched */
  response(json: unknown, stop?: readonly string[]): CanonicalResponse;
  /** a fresh incremental parser of the upstream's stream events */
  streamParser(stop?: readonly string[]): (ev: SseEvent) => StreamEvent[];
  /** the provider's error message from an error body */
  errorMessage(json: unknown): string | null;
  /** an error body that refuses the provider key rather than the request, for formats that say so with another status than 401/403 */
  keyRejected?(json: unknown): boolean;
}

export const textOf = (parts: Part[]): string =>
  parts
    .filter((p): p is { type: 'text'; text: string } => p.type === 'text')
    .map((p) => p.text)
    .join('');
