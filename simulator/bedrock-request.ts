// Validation of Amazon Bedrock Converse / ConverseStream bodies into the format-neutral
// GenRequest (the model id comes from the path). Messages follow Bedrock's ValidationException
// wording: "1 validation error detected: Value … at '<field>' failed to satisfy constraint: …".
import type { GenRequest } from './completion';
import type { Parsed } from './endpoint';
import { isRecord } from './text';

export interface ConverseRequest extends GenRequest {
  stream: boolean;
}

const fail = (message: string, param: string): Parsed<ConverseRequest> => ({ ok: false, message, param });
const constraint = (value: unknown, at: string, rule: string) =>
  fail(`1 validation error detected: Value ${value === undefined || value === null ? 'null' : `'${JSON.stringify(value)}'`} at '${at}' failed to satisfy constraint: ${rule}`, at);

// The members of a ContentBlock union (exactly one is set).
const USER_BLOCKS = new Set(['text', 'image', 'document', 'video', 'audio', 'toolResult', 'guardContent', 'cachePoint', 'searchResult']);
const ASSISTANT_BLOCKS = new Set(['text', 'image', 'document', 'toolUse', 'reasoningContent', 'cachePoint', 'citationsContent']);

/** Text of a toolResult's content blocks ({text} or {json}). */
function toolResultText(content: unknown): string | null {
  if (!Array.isArray(content)) return null;
  let out = '';
  for (const c of content) {
    if (!isRecord(c)) return null;
    if (typeof c.text === 'string') out += c.text;
    else if (c.json !== undefined) out += JSON.stringify(c.json);
  }
  return out;
}

function checkInference(cfg: unknown): Parsed<ConverseRequest> | { maxTokens: number | undefined; stop: string[] } {
  if (cfg === undefined) return { maxTokens: undefined, stop: [] };
  if (!isRecord(cfg)) return constraint(cfg, 'inferenceConfig', 'Member must be a structure');
  const { maxTokens, temperature, topP, stopSequences } = cfg;
  if (maxTokens !== undefined && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) return constraint(maxTokens, 'inferenceConfig.maxTokens', 'Member must have value greater than or equal to 1');
  if (temperature !== undefined && (typeof temperature !== 'number' || temperature < 0 || temperature > 1)) return constraint(temperature, 'inferenceConfig.temperature', 'Member must have value between 0 and 1');
  if (topP !== undefined && (typeof topP !== 'number' || topP < 0 || topP > 1)) return constraint(topP, 'inferenceConfig.topP', 'Member must have value between 0 and 1');
  if (stopSequences !== undefined && (!Array.isArray(stopSequences) || !stopSequences.every((s) => typeof s === 'string' && s.length > 0))) {
    return constraint(stopSequences, 'inferenceConfig.stopSequences', 'Member must be a list of non-empty strings');
  }
  return { maxTokens, stop: (stopSequences as string[] | undefined) ?? [] };
}

function checkTools(cfg: unknown): Parsed<ConverseRequest> | string[] {
  if (cfg === undefined) return [];
  if (!isRecord(cfg) || !Array.isArray(cfg.tools) || cfg.tools.length === 0) return constraint(isRecord(cfg) ? cfg.tools : cfg, 'toolConfig.tools', 'Member must have length greater than or equal to 1');
  const names: string[] = [];
  for (const [i, tool] of cfg.tools.entries()) {
    if (isRecord(tool) && isRecord(tool.cachePoint)) continue;
    const spec = isRecord(tool) ? tool.toolSpec : undefined;
    if (!isRecord(spec) || typeof spec.name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(spec.name)) return constraint(isRecord(spec) ? spec.name : spec, `toolConfig.tools.${i + 1}.member.toolSpec.name`, 'Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+');
    if (!isRecord(spec.inputSchema) || !isRecord(spec.inputSchema.json)) return constraint(spec.inputSchema, `toolConfig.tools.${i + 1}.member.toolSpec.inputSchema`, 'Member must be a union with a json document');
    names.push(spec.name);
  }
  const choice = cfg.toolChoice;
  if (choice !== undefined) {
    const ok = isRecord(choice) && Object.keys(choice).length === 1 && (isRecord(choice.auto) || isRecord(choice.any) || (isRecord(choice.tool) && typeof choice.tool.name === 'string'));
    if (!ok) return constraint(choice, 'toolConfig.toolChoice', 'Member must be one of auto, any or tool');
  }
  return names;
}

/** Parses a Converse body for `model` (the path's model id). */
export function parseConverseRequest(body: unknown, model: string, stream: boolean): Parsed<ConverseRequest> {
  if (!isRecord(body)) return fail('The request body must be a JSON object.', 'body');
  const { messages, system } = body;
  if (!Array.isArray(messages)) return constraint(messages, 'messages', 'Member must not be null');
  const inference = checkInference(body.inferenceConfig);
  if ('ok' in inference) return inference;
  const tools = checkTools(body.toolConfig);
  if (!Array.isArray(tools)) return tools;

  const texts: string[] = [];
  if (system !== undefined) {
    if (!Array.isArray(system)) return constraint(system, 'system', 'Member must be a list');
    for (const [i, s] of system.entries()) {
      if (!isRecord(s) || (typeof s.text !== 'string' && !isRecord(s.cachePoint) && !isRecord(s.guardContent))) return constraint(s, `system.${i + 1}.member`, 'Member must be a union with one member set');
      if (typeof s.text === 'string') texts.push(s.text);
    }
  }
  let lastUserText = '';
  let toolResult: string | null = null;
  let pendingToolUses = 0;
  let toolBlocks = false;
  for (const [i, message] of messages.entries()) {
    const at = `messages.${i + 1}.member`;
    if (!isRecord(message)) return constraint(message, at, 'Member must be a structure');
    const { role, content } = message;
    if (role !== 'user' && role !== 'assistant') return constraint(role, `${at}.role`, 'Member must satisfy enum value set: [user, assistant]');
    if (i === 0 && role !== 'user') return fail('A conversation must start with a user message. Try again with a conversation that starts with a user message.', 'messages');
    if (i > 0 && (messages[i - 1] as { role?: unknown }).role === role) {
      return fail('A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.', 'messages');
    }
    if (!Array.isArray(content) || content.length === 0) return constraint(content, `${at}.content`, 'Member must have length greater than or equal to 1');
    let text = '';
    const results: string[] = [];
    let toolUses = 0;
    for (const [j, block] of content.entries()) {
      const keys = isRecord(block) ? Object.keys(block) : [];
      const allowed = role === 'user' ? USER_BLOCKS : ASSISTANT_BLOCKS;
      if (keys.length !== 1 || !allowed.has(keys[0])) return constraint(block, `${at}.content.${j + 1}.member`, `Member must be a ContentBlock union with exactly one member a ${role} message may hold`);
      const b = block as Record<string, unknown>;
      if (keys[0] === 'text' && typeof b.text !== 'string') return constraint(b.text, `${at}.content.${j + 1}.member.text`, 'Member must be a string');
      if (keys[0] === 'toolUse') {
        const u = b.toolUse;
        if (!isRecord(u) || typeof u.toolUseId !== 'string' || typeof u.name !== 'string' || u.input === undefined) return constraint(u, `${at}.content.${j + 1}.member.toolUse`, 'Member must have toolUseId, name and input');
        toolUses += 1;
        toolBlocks = true;
      }
      if (keys[0] === 'toolResult') {
        const r = b.toolResult;
        const resultText = isRecord(r) && typeof r.toolUseId === 'string' ? toolResultText(r.content) : null;
        if (resultText === null) return constraint(r, `${at}.content.${j + 1}.member.toolResult`, 'Member must have toolUseId and a content list');
        results.push(resultText);
        toolBlocks = true;
      }
      if (typeof b.text === 'string') text += b.text;
    }
    if (results.length > pendingToolUses) {
      return fail(`The number of toolResult blocks at messages.${i}.content exceeds the number of toolUse blocks of previous turn.`, 'messages');
    }
    pendingToolUses = toolUses;
    texts.push(text + results.join(''));
    if (role === 'user' && (results.length === 0 || text.length > 0)) lastUserText = text;
    toolResult = role === 'user' && results.length > 0 ? results.join('\n') : null;
  }
  if (messages.length === 0) return constraint(messages, 'messages', 'Member must have length greater than or equal to 1');
  if (toolBlocks && body.toolConfig === undefined) return fail('The toolConfig field must be defined when using toolUse and toolResult content blocks.', 'toolConfig');
  const chars = texts.reduce((n, t) => n + t.length, 0);
  return {
    ok: true,
    request: {
      model,
      stream,
      maxTokens: inference.maxTokens,
      allText: texts.join('\n'),
      lastUserText,
      // The chat rule: ~4 characters a token plus 4 per message; system prompts count as one message.
      promptTokens: Math.ceil(chars / 4) + 4 * (messages.length + (texts.length > messages.length ? 1 : 0)),
      toolResult,
      tools,
      stop: inference.stop,
    },
  };
}
