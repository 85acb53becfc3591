import { randomBytes } from 'node:crypto';
import type { TokenUsage } from '../../domain/credits/pricing';
import type { CanonicalRequest, FinishReason, Message, Part, StreamEvent, ToolCall, UpstreamAdapter, UpstreamUsage } from '../canonical';

// Google's Gemini API (generateContent, streamGenerateContent?alt=sse): request, response and
// stream transforms, usage. No client dialect is Gemini's, so every request is translated; what
// the format cannot carry is named in `req.ignored` (docs/gateway.md, section Gemini).

interface UsageMetadata {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  toolUsePromptTokenCount?: number;
  totalTokenCount?: number;
}

interface GeminiPart {
  text?: string;
  thought?: boolean;
  functionCall?: { id?: string; name?: string; args?: Record<string, unknown> };
}

interface Candidate {
  content?: { role?: string; parts?: GeminiPart[] };
  finishReason?: string;
}

interface GenerateContentResponse {
  candidates?: Candidate[];
  promptFeedback?: { blockReason?: string };
  usageMetadata?: UsageMetadata;
  modelVersion?: string;
  responseId?: string;
}

/** Gemini takes at most 5 stop sequences. */
const MAX_STOP = 5;

const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/**
 * promptTokenCount includes the cached tokens (as the gateway's prompt_tokens does) and tool-use
 * prompts are counted apart; thoughts are billed as output but reported apart from candidates.
 */
export function geminiUsage(u: UsageMetadata | undefined): UpstreamUsage | null {
  if (!u || (typeof u.promptTokenCount !== 'number' && typeof u.candidatesTokenCount !== 'number')) return null;
  const thoughts = typeof u.thoughtsTokenCount === 'number' ? n(u.thoughtsTokenCount) : null;
  const tokens: TokenUsage = {
    prompt_tokens: n(u.promptTokenCount) + n(u.toolUsePromptTokenCount),
    completion_tokens: n(u.candidatesTokenCount) + (thoughts ?? 0),
    cached_tokens: n(u.cachedContentTokenCount),
    cache_write_tokens: 0,
    reasoning_tokens: thoughts,
  };
  // Gemini reports no cost: the catalog's prices bill it.
  return { tokens, cost: null, raw: u as Record<string, unknown> };
}

/** Finish reasons (FinishReason in Google's reference); those not listed end the answer as a plain stop. */
export const FINISH_FROM_GEMINI: Record<string, FinishReason> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  LANGUAGE: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
};

function part(p: Part): Record<string, unknown> {
  if (p.type === 'text') return { text: p.text };
  if (p.type === 'audio') return { inlineData: { mimeType: `audio/${p.format}`, data: p.data } };
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(p.url);
  return m ? { inlineData: { mimeType: m[1], data: m[2] } } : { fileData: { fileUri: p.url } };
}

function parseArgs(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args || '{}');
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : { value: v };
  } catch {
    return { _raw: args };
  }
}

type Content = { role: 'user' | 'model'; parts: Array<Record<string, unknown>> };

/**
 * Gemini 3 refuses a replayed function call without the thought signature it came with, which the
 * canonical form does not keep: Google's documented sentinel stands in for it (on the first call of
 * a turn, where Gemini puts the signature).
 */
export const SKIP_SIGNATURE = 'skip_thought_signature_validator';
const needsSignature = (upstreamModel: string) => /^(models\/)?gemini-3/.test(upstreamModel);

/**
 * Canonical messages as Gemini contents: system messages (wherever they are) joined into the
 * system instruction, assistant turns as `model`, tool results as `functionResponse` parts of a
 * user turn (named after the call they answer), consecutive turns of one role merged.
 */
export function geminiContents(messages: Message[], sign = false): { systemInstruction: { parts: Array<{ text: string }> } | undefined; contents: Content[] } {
  const system: string[] = [];
  const contents: Content[] = [];
  const names = new Map<string, string>();
  const push = (role: Content['role'], parts: Array<Record<string, unknown>>) => {
    const last = contents.at(-1);
    if (last && last.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of messages) {
    if (m.role === 'system') system.push(m.text);
    else if (m.role === 'user') push('user', m.parts.map(part));
    else if (m.role === 'tool') {
      push('user', [{ functionResponse: { id: m.toolCallId, name: names.get(m.toolCallId) ?? m.toolCallId, response: { output: m.content } } }]);
    } else {
      const parts = m.parts.filter((p) => p.type !== 'text' || p.text !== '').map(part);
      m.toolCalls.forEach((t, i) => {
        names.set(t.id, t.name);
        parts.push({ functionCall: { id: t.id, name: t.name, args: parseArgs(t.arguments) }, ...(sign && i === 0 ? { thoughtSignature: SKIP_SIGNATURE } : {}) });
      });
      push('model', parts);
    }
  }
  return { systemInstruction: system.length ? { parts: [{ text: system.join('\n\n') }] } : undefined, contents };
}

function toolConfig(choice: CanonicalRequest['toolChoice']): Record<string, unknown> | undefined {
  if (!choice) return undefined;
  if (typeof choice === 'object') return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [choice.name] } };
  return { functionCallingConfig: { mode: choice === 'required' ? 'ANY' : choice === 'none' ? 'NONE' : 'AUTO' } };
}

const callId = () => `call_${randomBytes(12).toString('hex')}`;

/** A function call part as a canonical tool call (Gemini names an id only on some models). */
const toolCallOf = (fc: NonNullable<GeminiPart['functionCall']>): ToolCall => ({ id: fc.id || callId(), name: fc.name ?? '', arguments: JSON.stringify(fc.args ?? {}) });

/**
 * Gemini says STOP for a function call and for a stop sequence alike, and leaves the sequence
 * out of the text: calls make it `tool_calls`; a stop with one sequence asked is that sequence,
 * with several the one the text ends with; else a plain stop (as for OpenAI, providers/openai/chat.ts).
 */
function finishOf(reason: string | undefined, blocked: boolean, calls: number, stop: readonly string[], text: string): { reason: FinishReason; stopSequence: string | null } {
  if (blocked) return { reason: 'content_filter', stopSequence: null };
  const mapped = FINISH_FROM_GEMINI[reason ?? 'STOP'] ?? 'stop';
  if (mapped === 'stop' && calls > 0) return { reason: 'tool_calls', stopSequence: null };
  if (mapped !== 'stop' || stop.length === 0) return { reason: mapped, stopSequence: null };
  const hit = stop.length === 1 ? stop[0] : (stop.find((s) => text.endsWith(s)) ?? null);
  return hit === null ? { reason: 'stop', stopSequence: null } : { reason: 'stop_sequence', stopSequence: hit };
}

export const geminiGenerate: UpstreamAdapter = {
  native: null,
  path: (_provider, upstreamModel, stream) => `v1beta/models/${encodeURIComponent(upstreamModel)}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`,
  authHeaders: (key) => ({ 'x-goog-api-key': key }),

  request(req: CanonicalRequest, upstreamModel) {
    const { systemInstruction, contents } = geminiContents(req.messages, needsSignature(upstreamModel));
    const out: Record<string, unknown> = { contents };
    if (systemInstruction) out.systemInstruction = systemInstruction;
    const config: Record<string, unknown> = {};
    if (req.maxTokens !== null) config.maxOutputTokens = req.maxTokens;
    if (req.temperature !== undefined) config.temperature = req.temperature;
    if (req.topP !== undefined) config.topP = req.topP;
    if (req.stop.length) {
      config.stopSequences = req.stop.slice(0, MAX_STOP);
      if (req.stop.length > MAX_STOP) req.ignored.push(`stop_sequences;truncated=${MAX_STOP}`);
    }
    // Full JSON Schema (responseJsonSchema, parametersJsonSchema), not the OpenAPI subset of responseSchema: clients send JSON Schema.
    if (req.jsonSchema) Object.assign(config, { responseMimeType: 'application/json', responseJsonSchema: req.jsonSchema.schema });
    if (Object.keys(config).length) out.generationConfig = config;
    if (req.tools.length) out.tools = [{ functionDeclarations: req.tools.map((t) => ({ name: t.name, description: t.description, parametersJsonSchema: t.parameters })) }];
    const tc = toolConfig(req.toolChoice);
    if (tc) out.toolConfig = tc;
    if (req.reasoningEffort) req.ignored.push('reasoning_effort');
    if (req.user) req.ignored.push('user');
    return out;
  },

  response(json, stop = []) {
    const b = json as GenerateContentResponse;
    const candidate = b.candidates?.[0];
    const parts = candidate?.content?.parts ?? [];
    const text = parts.filter((p) => typeof p.text === 'string' && !p.thought).map((p) => p.text).join('');
    const toolCalls = parts.filter((p) => p.functionCall).map((p) => toolCallOf(p.functionCall!));
    const finish = finishOf(candidate?.finishReason, !candidate && Boolean(b.promptFeedback?.blockReason), toolCalls.length, stop, text);
    return {
      id: b.responseId ?? '',
      model: b.modelVersion ?? '',
      created: Math.floor(Date.now() / 1000),
      text,
      reasoning: parts.filter((p) => p.thought && typeof p.text === 'string').map((p) => p.text).join(''),
      toolCalls,
      finish: finish.reason,
      stopSequence: finish.stopSequence,
      usage: geminiUsage(b.usageMetadata),
    };
  },

  /** Each event is a whole GenerateContentResponse holding the new parts; the last has the finish reason and the final usage. */
  streamParser(stop = []) {
    let started = false;
    let calls = 0;
    let tail = '';
    const keep = Math.max(0, ...stop.map((s) => s.length));
    return (ev) => {
      if (ev.data === null) return [];
      let chunk: GenerateContentResponse & { error?: { message?: string } };
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        return [];
      }
      if (chunk.error) throw new Error(`provider stream error: ${chunk.error.message ?? 'unknown'}`);
      const out: StreamEvent[] = [];
      if (!started) {
        started = true;
        out.push({ type: 'start', id: chunk.responseId ?? '', model: chunk.modelVersion ?? '' });
      }
      const candidate = chunk.candidates?.[0];
      for (const p of candidate?.content?.parts ?? []) {
        if (p.functionCall) {
          const t = toolCallOf(p.functionCall);
          out.push({ type: 'tool_call', index: calls, id: t.id, name: t.name }, { type: 'tool_args', index: calls, fragment: t.arguments });
          calls += 1;
        } else if (p.text) {
          if (p.thought) out.push({ type: 'reasoning', text: p.text });
          else {
            out.push({ type: 'text', text: p.text });
            if (keep) tail = (tail + p.text).slice(-keep);
          }
        }
      }
      const blocked = !candidate && Boolean(chunk.promptFeedback?.blockReason);
      if (candidate?.finishReason || blocked) {
        out.push({ type: 'finish', ...finishOf(candidate?.finishReason, blocked, calls, stop, tail) });
        const usage = geminiUsage(chunk.usageMetadata);
        if (usage) out.push({ type: 'usage', usage });
      }
      return out;
    };
  },

  errorMessage: (json) => (json as { error?: { message?: string } })?.error?.message ?? null,

  /** Gemini refuses a bad key with 400 INVALID_ARGUMENT, its ErrorInfo detail saying API_KEY_INVALID. */
  keyRejected: (json) => ((json as { error?: { details?: Array<{ reason?: string }> } })?.error?.details ?? []).some((d) => d?.reason === 'API_KEY_INVALID'),
};
