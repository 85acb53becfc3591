// Validation of OpenAI Responses requests (POST /v1/responses) into the format-neutral
// GenRequest. Errors are OpenAI-style (message + param).
import type { GenRequest } from './completion';
import type { Parsed } from './endpoint';
import { isRecord, numberIn, optionalPositiveInt, partsText } from './text';

export interface ResponsesRequest extends GenRequest {
  stream: boolean;
  /** Request fields the response object echoes back. */
  echo: {
    instructions: string | null;
    max_output_tokens: number | null;
    previous_response_id: string | null;
    reasoning: { effort: unknown; summary: unknown };
    store: boolean;
    temperature: number;
    top_p: number;
    text: unknown;
    tool_choice: unknown;
    tools: unknown[];
    metadata: unknown;
  };
}

const ROLES = ['user', 'assistant', 'system', 'developer'];
const TEXT_PARTS = ['input_text', 'output_text', 'summary_text', 'reasoning_text', 'refusal'];
const OTHER_PARTS = ['input_image', 'input_file', 'input_audio'];
const IGNORED_ITEMS = ['reasoning', 'item_reference'];

const fail = (message: string, param: string): Parsed<ResponsesRequest> => ({ ok: false, message, param });

/** Text of a message's content (string or parts); a string describing the problem on bad input. */
function messageText(content: unknown, at: string): { text: string } | { error: string } {
  if (typeof content === 'string') return { text: content };
  if (!Array.isArray(content)) return { error: `Invalid '${at}.content': expected a string or an array of content parts.` };
  for (let i = 0; i < content.length; i++) {
    const part: unknown = content[i];
    const type = isRecord(part) ? part.type : undefined;
    if (typeof type === 'string' && TEXT_PARTS.includes(type)) {
      const text = type === 'refusal' ? (part as Record<string, unknown>).refusal : (part as Record<string, unknown>).text;
      if (typeof text !== 'string') return { error: `Invalid '${at}.content[${i}]': a ${type} part needs a string.` };
    } else if (typeof type !== 'string' || !OTHER_PARTS.includes(type)) {
      return { error: `Invalid '${at}.content[${i}].type': unknown content part type '${String(type)}'.` };
    }
  }
  return { text: partsText(content) };
}

interface Conversation {
  texts: string[];
  items: number;
  lastUserText: string | null;
  lastText: string;
  toolResult: string | null;
}

function readInput(input: unknown): Conversation | { error: string; param: string } {
  if (typeof input === 'string') return { texts: [input], items: 1, lastUserText: input, lastText: input, toolResult: null };
  if (!Array.isArray(input) || input.length === 0) return { error: "Missing required parameter: 'input'.", param: 'input' };
  const conv: Conversation = { texts: [], items: input.length, lastUserText: null, lastText: '', toolResult: null };
  let results: string[] = [];
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i];
    const at = `input[${i}]`;
    if (!isRecord(item)) return { error: `Invalid '${at}': expected an object.`, param: at };
    const type = item.type ?? 'message';
    let result: string | null = null;
    if (type === 'message') {
      if (typeof item.role !== 'string' || !ROLES.includes(item.role)) {
        return { error: `Invalid '${at}.role': expected one of ${ROLES.join(', ')}.`, param: `${at}.role` };
      }
      const text = messageText(item.content, at);
      if ('error' in text) return { error: text.error, param: `${at}.content` };
      conv.texts.push(text.text);
      conv.lastText = text.text;
      if (item.role === 'user') conv.lastUserText = text.text;
    } else if (type === 'function_call') {
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string') {
        return { error: `Invalid '${at}': function_call needs string 'call_id', 'name' and 'arguments'.`, param: at };
      }
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string') return { error: `Missing required parameter: '${at}.call_id'.`, param: `${at}.call_id` };
      const output = typeof item.output === 'string' ? { text: item.output } : messageText(item.output, at);
      if ('error' in output) return { error: `Invalid '${at}.output': expected a string or content parts.`, param: `${at}.output` };
      conv.texts.push(output.text);
      result = output.text;
    } else if (typeof type !== 'string' || !IGNORED_ITEMS.includes(type)) {
      return { error: `Invalid '${at}.type': unsupported input item type '${String(type)}'.`, param: `${at}.type` };
    }
    // The trailing run of function_call_output items is the tool result being answered.
    if (result !== null) results.push(result);
    else if (results.length > 0) results = [];
  }
  conv.toolResult = results.length > 0 ? results.join('\n') : null;
  return conv;
}

function checkOptions(body: Record<string, unknown>): { error: string; param: string } | null {
  const bad = (param: string, what: string) => ({ error: `Invalid '${param}': expected ${what}.`, param });
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') return bad('stream', 'a boolean');
  if (body.store !== undefined && body.store !== null && typeof body.store !== 'boolean') return bad('store', 'a boolean');
  if (!optionalPositiveInt(body.max_output_tokens)) return bad('max_output_tokens', 'a positive integer');
  if (!numberIn(body.temperature, 0, 2)) return bad('temperature', 'a number between 0 and 2');
  if (!numberIn(body.top_p, 0, 1)) return bad('top_p', 'a number between 0 and 1');
  if (body.instructions !== undefined && body.instructions !== null && typeof body.instructions !== 'string') {
    return bad('instructions', 'a string');
  }
  const prev = body.previous_response_id;
  if (prev !== undefined && prev !== null && typeof prev !== 'string') return bad('previous_response_id', 'a string');
  for (const name of ['reasoning', 'metadata', 'text']) {
    const value = body[name];
    if (value !== undefined && value !== null && !isRecord(value)) return bad(name, 'an object');
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && typeof choice !== 'string' && !isRecord(choice)) {
    return bad('tool_choice', 'a string or an object');
  }
  return null;
}

function checkTools(tools: unknown): { names: string[]; list: unknown[] } | { error: string; param: string } {
  if (tools === undefined || tools === null) return { names: [], list: [] };
  if (!Array.isArray(tools)) return { error: "Invalid 'tools': expected an array.", param: 'tools' };
  const names: string[] = [];
  for (let i = 0; i < tools.length; i++) {
    const tool: unknown = tools[i];
    if (!isRecord(tool) || typeof tool.type !== 'string') return { error: `Missing required parameter: 'tools[${i}].type'.`, param: `tools[${i}].type` };
    if (tool.type !== 'function') continue; // built-in tools are accepted and never called
    if (typeof tool.name !== 'string' || tool.name.length === 0) {
      return { error: `Missing required parameter: 'tools[${i}].name'.`, param: `tools[${i}].name` };
    }
    names.push(tool.name);
  }
  return { names, list: tools };
}

export function parseResponsesRequest(body: unknown): Parsed<ResponsesRequest> {
  if (!isRecord(body)) return fail('Request body must be a JSON object.', 'body');
  const { model, instructions } = body;
  if (typeof model !== 'string' || model.length === 0) return fail("Missing required parameter: 'model'.", 'model');
  const options = checkOptions(body);
  if (options) return fail(options.error, options.param);
  const tools = checkTools(body.tools);
  if ('error' in tools) return fail(tools.error, tools.param);
  const conv = readInput(body.input);
  if ('error' in conv) return fail(conv.error, conv.param);

  // Counted like chat: instructions are one more message when non-empty.
  const system = typeof instructions === 'string' && instructions.length > 0 ? instructions : null;
  const texts = system ? [system, ...conv.texts] : conv.texts;
  const chars = texts.reduce((n, t) => n + t.length, 0);
  const maxTokens = typeof body.max_output_tokens === 'number' ? body.max_output_tokens : undefined;
  const reasoning = isRecord(body.reasoning) ? body.reasoning : {};
  return {
    ok: true,
    request: {
      model,
      stream: body.stream === true,
      maxTokens,
      allText: texts.join('\n'),
      lastUserText: conv.lastUserText ?? conv.lastText,
      promptTokens: Math.ceil(chars / 4) + 4 * (conv.items + (system ? 1 : 0)),
      toolResult: conv.toolResult,
      tools: tools.names,
      stop: [], // the Responses API has no stop parameter
      echo: {
        instructions: typeof instructions === 'string' ? instructions : null,
        max_output_tokens: maxTokens ?? null,
        previous_response_id: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
        reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
        store: body.store !== false,
        temperature: typeof body.temperature === 'number' ? body.temperature : 1,
        top_p: typeof body.top_p === 'number' ? body.top_p : 1,
        text: isRecord(body.text) ? body.text : { format: { type: 'text' } },
        tool_choice: body.tool_choice ?? 'auto',
        tools: tools.list,
        metadata: isRecord(body.metadata) ? body.metadata : {},
      },
    },
  };
}
