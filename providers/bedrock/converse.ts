import type { ContentBlock, ConverseCommandInput, ConverseResponse, Message as BedrockMessage, SystemContentBlock, TokenUsage as BedrockUsage, ToolChoice as BedrockToolChoice } from '@aws-sdk/client-bedrock-runtime';
import { GatewayError } from '../../domain/shared/errors';
import type { CanonicalRequest, CanonicalResponse, FinishReason, Message, Part, StreamEvent, UpstreamUsage } from '../canonical';

// Amazon Bedrock's Converse format: the canonical request as a ConverseCommandInput, and the
// answer and stream events back. Bedrock reports no cost (the charge follows the tokens) and not
// which stop sequence matched.

const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Bedrock's inputTokens excludes cache reads and writes (as Anthropic's); the gateway's prompt_tokens includes them. */
export function bedrockUsage(u: BedrockUsage | undefined): UpstreamUsage | null {
  if (!u || (typeof u.inputTokens !== 'number' && typeof u.outputTokens !== 'number')) return null;
  const cacheRead = n(u.cacheReadInputTokens);
  const cacheWrite = n(u.cacheWriteInputTokens);
  return {
    tokens: {
      prompt_tokens: n(u.inputTokens) + cacheRead + cacheWrite,
      completion_tokens: n(u.outputTokens),
      cached_tokens: cacheRead,
      cache_write_tokens: cacheWrite,
      reasoning_tokens: null, // counted in outputTokens, not apart
    },
    cost: null,
    raw: { ...u },
  };
}

const FINISH: Record<string, FinishReason> = {
  end_turn: 'stop',
  tool_use: 'tool_calls',
  max_tokens: 'length',
  stop_sequence: 'stop_sequence',
  guardrail_intervened: 'content_filter',
  content_filtered: 'content_filter',
  model_context_window_exceeded: 'length',
};

/**
 * The finish reason and, for `stop_sequence`, the sequence that matched: Bedrock does not name it
 * and leaves it out of the text, so it is known only when the request had one (else null).
 */
function finishOf(stopReason: string | undefined, stop: readonly string[]): { finish: FinishReason; stopSequence: string | null } {
  const finish = FINISH[stopReason ?? 'end_turn'] ?? 'stop';
  return { finish, stopSequence: finish === 'stop_sequence' && stop.length === 1 ? stop[0] : null };
}

const IMAGE_FORMATS = new Set(['png', 'jpeg', 'gif', 'webp']);

function contentOf(parts: Part[]): ContentBlock[] {
  return parts.map((p): ContentBlock => {
    if (p.type === 'text') return { text: p.text };
    if (p.type === 'image') {
      // Converse takes image bytes (or an S3 location), never a web URL.
      const m = /^data:image\/([a-z]+);base64,(.*)$/s.exec(p.url);
      const format = m?.[1] === 'jpg' ? 'jpeg' : m?.[1];
      if (!m || !format || !IMAGE_FORMATS.has(format)) throw new GatewayError('unsupported_parameter', { param: 'messages', detail: 'this model takes images as base64 data URLs (png, jpeg, gif, webp) only' });
      return { image: { format: format as 'png', source: { bytes: Buffer.from(m[2], 'base64') } } };
    }
    throw new GatewayError('unsupported_parameter', { param: 'messages', detail: 'this model does not take audio input' });
  });
}

function parseArgs(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args || '{}');
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : { value: v };
  } catch {
    return { _raw: args };
  }
}

/** Every system message as a system block; turns alternate, so same-role neighbours (tool results are user turns) merge. */
function conversation(messages: Message[]): { system: SystemContentBlock[]; turns: BedrockMessage[] } {
  const system: SystemContentBlock[] = [];
  const turns: BedrockMessage[] = [];
  const push = (role: 'user' | 'assistant', content: ContentBlock[]) => {
    const last = turns.at(-1);
    if (last?.role === role) last.content!.push(...content);
    else turns.push({ role, content });
  };
  for (const m of messages) {
    if (m.role === 'system') system.push({ text: m.text });
    else if (m.role === 'user') push('user', contentOf(m.parts));
    else if (m.role === 'tool') push('user', [{ toolResult: { toolUseId: m.toolCallId, content: [{ text: m.content }] } }]);
    else {
      const content = contentOf(m.parts.filter((p) => p.type !== 'text' || p.text !== ''));
      for (const t of m.toolCalls) content.push({ toolUse: { toolUseId: t.id, name: t.name, input: parseArgs(t.arguments) as never } });
      push('assistant', content);
    }
  }
  return { system, turns };
}

function toolChoiceOf(c: CanonicalRequest['toolChoice']): BedrockToolChoice | undefined {
  if (c === undefined || c === 'auto') return { auto: {} };
  if (c === 'required') return { any: {} };
  if (c === 'none') return undefined;
  return { tool: { name: c.name } };
}

/**
 * The Converse input; what it cannot carry is added to `req.ignored`: reasoning effort, JSON
 * schema output and `user` (model-specific or absent in Converse). Converse has no tool choice
 * `none`: the tools are left out, unless the conversation holds tool calls (Converse then needs
 * its toolConfig), where the choice is `auto` and `tool_choice` is reported ignored.
 */
export function converseInput(req: CanonicalRequest, modelId: string): ConverseCommandInput {
  const { system, turns } = conversation(req.messages);
  const input: ConverseCommandInput = { modelId, messages: turns };
  if (system.length) input.system = system;
  const inference: NonNullable<ConverseCommandInput['inferenceConfig']> = {};
  if (req.maxTokens !== null) inference.maxTokens = req.maxTokens;
  if (req.temperature !== undefined) inference.temperature = req.temperature;
  if (req.topP !== undefined) inference.topP = req.topP;
  if (req.stop.length) inference.stopSequences = req.stop;
  if (Object.keys(inference).length) input.inferenceConfig = inference;
  let choice = toolChoiceOf(req.toolChoice);
  const toolTurns = req.messages.some((m) => m.role === 'tool' || (m.role === 'assistant' && m.toolCalls.length > 0));
  if (req.tools.length && !choice && toolTurns) {
    choice = { auto: {} };
    req.ignored.push('tool_choice');
  }
  if (req.tools.length && choice) {
    input.toolConfig = { tools: req.tools.map((t) => ({ toolSpec: { name: t.name, description: t.description, inputSchema: { json: t.parameters as never } } })), toolChoice: choice };
  }
  if (req.reasoningEffort) req.ignored.push('reasoning_effort');
  if (req.jsonSchema) req.ignored.push('response_format');
  if (req.user) req.ignored.push('user');
  return input;
}

/** A Converse answer (the SDK's output, as JSON) in canonical form. */
export function converseResponse(json: ConverseResponse & { requestId?: string }, stop: readonly string[]): CanonicalResponse {
  const content = json.output?.message?.content ?? [];
  const text = content.map((c) => c.text ?? '').join('');
  return {
    id: json.requestId ?? '',
    model: '',
    created: Math.floor(Date.now() / 1000),
    text,
    reasoning: content.map((c) => c.reasoningContent?.reasoningText?.text ?? '').join(''),
    toolCalls: content.filter((c) => c.toolUse).map((c) => ({ id: c.toolUse!.toolUseId ?? '', name: c.toolUse!.name ?? '', arguments: JSON.stringify(c.toolUse!.input ?? {}) })),
    ...finishOf(json.stopReason, stop),
    usage: bedrockUsage(json.usage),
  };
}

/** A fresh parser of ConverseStream events by name (relayed as `event: <name>` + JSON data, see client.ts). */
export function converseStreamParser(stop: readonly string[]) {
  const toolIndex = new Map<number, number>();
  return (name: string, e: Record<string, unknown>): StreamEvent[] => {
    const block = typeof e.contentBlockIndex === 'number' ? e.contentBlockIndex : 0;
    switch (name) {
      case 'messageStart':
        return [{ type: 'start', id: typeof e.requestId === 'string' ? e.requestId : '', model: '' }];
      case 'contentBlockStart': {
        const tool = (e.start as { toolUse?: { toolUseId?: string; name?: string } } | undefined)?.toolUse;
        if (!tool) return [];
        const index = toolIndex.size;
        toolIndex.set(block, index);
        return [{ type: 'tool_call', index, id: tool.toolUseId ?? '', name: tool.name ?? '' }];
      }
      case 'contentBlockDelta': {
        const d = (e.delta ?? {}) as { text?: string; toolUse?: { input?: string }; reasoningContent?: { text?: string } };
        if (d.text) return [{ type: 'text', text: d.text }];
        if (d.toolUse?.input) return [{ type: 'tool_args', index: toolIndex.get(block) ?? 0, fragment: d.toolUse.input }];
        if (d.reasoningContent?.text) return [{ type: 'reasoning', text: d.reasoningContent.text }];
        return [];
      }
      case 'messageStop': {
        const { finish, stopSequence } = finishOf(e.stopReason as string | undefined, stop);
        return [{ type: 'finish', reason: finish, stopSequence }];
      }
      case 'metadata': {
        const usage = bedrockUsage(e.usage as BedrockUsage | undefined);
        return usage ? [{ type: 'usage', usage }] : [];
      }
      default:
        return [];
    }
  };
}
