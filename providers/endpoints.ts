import type { Dispatcher } from 'undici';
import type { Provider } from '../domain/catalog/model';
import type { VideoStatus } from '../domain/media/video';
import type { SseEvent, UpstreamAdapter } from './canonical';
import type { FormPart } from './upstream';

// What one provider kind offers, keyed by endpoint, and the gateway's own request shapes each
// endpoint takes. A kind's folder exports one ProviderConfig; an endpoint it lacks is absent.

export interface UpstreamImageParams {
  prompt: string;
  n: number;
  stream: boolean;
  /** previews per image (0–3) when streaming; absent: the provider's default */
  partial_images?: number;
  size?: string;
  quality?: string;
  output_format?: string;
  output_compression?: number;
  background?: string;
  seed?: number;
  negative_prompt?: string;
  guidance?: number;
  steps?: number;
  /** provider.options for this provider: merged first, so they never override the fields above */
  options?: Record<string, unknown>;
}

export interface UpstreamImageUsage {
  input: number;
  output: number;
}

export interface UpstreamImages {
  images: string[];
  usage: UpstreamImageUsage | null;
  /** the provider's cost in its currency, when reported */
  cost: number | undefined;
}

export type ImageStreamEvent =
  | { type: 'partial'; b64: string; imageIndex: number; partialIndex: number }
  | { type: 'completed'; b64: string; imageIndex: number; usage: UpstreamImageUsage | null; cost: number | undefined };

export interface SpeechParams {
  input: string;
  voice?: string;
  response_format: 'mp3' | 'pcm';
  speed?: number;
  input_references?: unknown[];
  /** provider.options for this provider, merged into the body */
  options?: Record<string, unknown>;
}

export interface TranscriptionParams {
  audio: Buffer;
  format: string;
  language?: string;
  temperature?: number;
  verbose: boolean;
  granularities?: string[];
  options?: Record<string, unknown>;
}

/** The gateway's validated create request (spec 1 section 4.3). */
export interface VideoCreate {
  prompt?: string;
  duration: number;
  resolution: string;
  aspect_ratio?: string;
  size?: string;
  frame_images?: unknown[];
  input_references?: unknown[];
  generate_audio?: boolean;
  seed?: number;
  provider?: { options?: Record<string, unknown> };
}

/** POST embeddings: OpenAI's body passes through with the model id mapped. */
export interface EmbeddingsEndpoint {
  path: string;
  errorMessage(json: unknown): string | null;
}

export interface ImagesEndpoint {
  generationsPath: string;
  editsPath: string;
  requestBody(upstreamModel: string, p: UpstreamImageParams, inputDataUrls: string[]): Record<string, unknown>;
  parseResponse(json: Record<string, unknown>): UpstreamImages;
  parseStreamEvent(data: SseEvent['data']): ImageStreamEvent | null;
  errorMessage(json: unknown): string | null;
}

export interface SpeechEndpoint {
  path: string;
  request(p: SpeechParams, upstreamModel: string): Record<string, unknown>;
  contentType: Record<SpeechParams['response_format'], string>;
  /** the response header naming the generation whose cost is recorded late */
  generationIdHeader: string;
}

export interface TranscriptionEndpoint {
  path: string;
  request(p: TranscriptionParams, upstreamModel: string): FormPart[];
  result(json: Record<string, unknown>): { body: Record<string, unknown>; usage: Record<string, unknown> | null };
  generationIdHeader: string;
}

export interface ProviderVideoObject {
  id: string;
  status: VideoStatus;
  error: string | null;
  cost: string | number | null;
}

/** Video jobs: the create goes through postUpstream; the job and its content are read here. */
export interface VideosEndpoint {
  createPath: string;
  createBody(req: VideoCreate, upstreamModel: string, previousUpstreamId: string | null): Record<string, unknown>;
  parseJob(json: Record<string, unknown>): ProviderVideoObject;
  fetchJob(provider: Provider, upstreamId: string, timeoutMs?: number): Promise<Dispatcher.ResponseData>;
  fetchContent(provider: Provider, upstreamId: string, range: string | undefined, signal: AbortSignal, timeoutMs: number): Promise<Dispatcher.ResponseData>;
}

/** A provider's settings as the operator sets them (services/catalog/entries.ts). */
export interface ProviderSettings {
  /** Bedrock: the AWS region the calls are signed for */
  region: string | undefined;
  /** Azure OpenAI: the API version every call names */
  apiVersion: string | undefined;
  apiKeys: string[];
}

export interface ProviderConfig {
  /** the headers that authenticate a call with one of the provider's keys */
  authHeaders(key: string): Record<string, string>;
  /** problems of a provider's settings for this kind, by field (never quoting a key); absent: the kind takes neither region nor API version */
  checkSettings?(s: ProviderSettings): Array<{ field: string; message: string }>;
  chat?: UpstreamAdapter;
  embeddings?: EmbeddingsEndpoint;
  images?: ImagesEndpoint;
  speech?: SpeechEndpoint;
  transcription?: TranscriptionEndpoint;
  videos?: VideosEndpoint;
}

export type Endpoint = Exclude<keyof ProviderConfig, 'authHeaders' | 'checkSettings'>;
