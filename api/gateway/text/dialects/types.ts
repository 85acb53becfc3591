import type { z } from 'zod';
import type { GatewayError } from '../../../../domain/shared/errors';
import type { Charge } from '../../../../domain/credits/pricing';
import type { CanonicalRequest, CanonicalResponse, Dialect, StreamEvent, UpstreamUsage } from '../../../../providers/canonical';
import type { CatalogModel } from '../../../../domain/catalog/model';
import type { Hold } from '../../../../services/credits/holds';

/** What a rendered answer may show about credits. */
export interface Billing {
  hold: Hold;
  charge: Charge;
  usage: UpstreamUsage | null;
  /** provider cost converted to credits, null when none was reported */
  providerCost: string | null;
}

export interface StreamWriter {
  /** Native pass-through: the upstream's raw event and what it means. */
  native(raw: string, events: StreamEvent[]): void;
  /** Translated: one canonical event. */
  event(e: StreamEvent): void;
  /** The stream ended normally: closing events, with usage where the dialect carries it. */
  end(billing: Billing): void;
  /** The upstream broke mid-stream. */
  fail(e: GatewayError): void;
}

/** The audio of a chat request, as far as the hold and a cut stream need it. */
export interface RequestAudio {
  /** input_audio parts: their audio tokens at most, and a plausible count */
  input: { tokenBound: number; tokenEstimate: number } | null;
  /** audio output asked for: plausible audio tokens of the audio bytes already sent */
  output: { tokensOf(bytes: number): number } | null;
}

export const NO_AUDIO: RequestAudio = { input: null, output: null };

/** A client-facing request dialect: chat completions, messages or responses. */
export interface ClientDialect<Req = unknown> {
  name: Dialect;
  endpoint: string;
  schema: z.ZodType<Req>;
  model(req: Req): string;
  stream(req: Req): boolean;
  /** output tokens asked for; null = the model's limit */
  maxTokens(req: Req): number | null;
  /** the client's body with its output-token limit set to `n` (a clamp, on native pass-through) */
  withMaxTokens(body: Record<string, unknown>, n: number): Record<string, unknown>;
  /** checks beyond the schema that need the model, reading the request's audio (chat) */
  inspect?(req: Req, model: CatalogModel): Promise<RequestAudio>;
  toCanonical(req: Req, model: CatalogModel): CanonicalRequest;
  /** upper bound of prompt tokens (a token is at least one byte) */
  promptTokenBound(req: Req): number;
  /** a plausible prompt size, for streams cancelled before the provider reported usage */
  promptTokenEstimate(req: Req): number;
  /** the answer body, translated from another upstream dialect; `id` is its lookup id */
  render(resp: CanonicalResponse, billing: Billing, ctx: RenderContext): { id: string; body: unknown };
  /** the upstream's own answer in this dialect, with the credit fields the dialect carries */
  renderNative(json: Record<string, unknown>, billing: Billing): { id: string; body: unknown };
  streamWriter(write: (chunk: string) => void, ctx: RenderContext): StreamWriter;
  errorBody(e: GatewayError): unknown;
}

export interface RenderContext {
  requestId: string;
  /** the model id the client asked for */
  model: string;
  created: number;
}

/** Compact ids in a vendor's style, derived from the request id. */
export const vendorId = (prefix: string, requestId: string) => `${prefix}${requestId.replace(/-/g, '')}`;
