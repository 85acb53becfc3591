// Validation of Anthropic Messages requests (POST /v1/messages) into the format-neutral
// GenRequest. Error messages follow Anthropic's `field.path: problem` style.
import type { GenRequest } from './completion';
import type { Parsed } from './endpoint';
import { isRecord, numberIn, optionalPositiveInt, partsText } from './text';

export interface MessagesRequest extends GenRequest {
  stream: boolean;
}

type Check = string | null; // an error message, or null when fine

const fail = (message: string, param: string): Parsed<MessagesRequest> => ({ ok: false, message, param });

function checkImageSource(source: unknown, at: string): Check {
  if (!isRecord(source)) return `${at}.source: Field required`;
  if (source.type === 'base64') {
    return typeof source.media_type === 'string' && typeof source.data === 'string'
      ? null
      : `${at}.source: base64 sources need string 'media_type' and 'data'`;
  }
  if (source.type === 'url') return typeof source.url === 'string' ? null : `${at}.source.url: Field required`;
  return `${at}.source.type: Input should be 'base64' or 'url'`;
}

/** Text of a tool_result `content`: a string or text/image blocks. */
function toolResultText(content: unknown, at: string): { text: string } | { error: string } {
  if (content === undefined || content === null) return { text: '' };
  if (typeof content === 'string') return { text: content };
  if (!Array.isArray(content)) return { error: `${at}.content: Input should be a valid string or list` };
  for (let i = 0; i < content.length; i++) {
    const block: unknown = content[i];
    let problem: Check;
    if (!isRecord(block)) problem = 'Input should be an object';
    else if (block.type === 'text') problem = typeof block.text === 'string' ? null : 'text: Field required';
    else if (block.type === 'image') problem = checkImageSource(block.source, 'image');
    else problem = `Input tag '${String(block.type)}' does not match 'text' or 'image'`;
    if (problem !== null) return { error: `${at}.content.${i}: ${problem}` };
  }
  return { text: partsText(content) };
}

/** Checks one content block; `role` decides which block types are allowed. */
function checkBlock(block: unknown, role: string, at: string): Check {
  if (!isRecord(block)) return `${at}: Input should be an object`;
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string' ? null : `${at}.text: Field required`;
    case 'image':
      return checkImageSource(block.source, at);
    case 'tool_use':
      if (role !== 'assistant') return `${at}: tool_use blocks are only allowed in assistant messages`;
      return typeof block.id === 'string' && typeof block.name === 'string' && isRecord(block.input)
        ? null
        : `${at}: tool_use needs string 'id' and 'name' and an object 'input'`;
    case 'tool_result':
      if (role !== 'user') return `${at}: tool_result blocks are only allowed in user messages`;
      if (typeof block.tool_use_id !== 'string') return `${at}.tool_use_id: Field required`;
      if (block.is_error !== undefined && typeof block.is_error !== 'boolean') return `${at}.is_error: Input should be a boolean`;
      return null;
    case 'thinking':
      if (role !== 'assistant') return `${at}: thinking blocks are only allowed in assistant messages`;
      return typeof block.thinking === 'string' && typeof block.signature === 'string'
        ? null
        : `${at}: thinking needs string 'thinking' and 'signature'`;
    case 'redacted_thinking':
      return typeof block.data === 'string' ? null : `${at}.data: Field required`;
    case 'document':
      return isRecord(block.source) && typeof block.source.type === 'string' ? null : `${at}.source: Field required`;
    case 'search_result':
      return typeof block.source === 'string' && typeof block.title === 'string' && Array.isArray(block.content) ? null : `${at}: search_result needs string 'source' and 'title' and a list 'content'`;
    case 'container_upload':
      return typeof block.file_id === 'string' ? null : `${at}.file_id: Field required`;
    case 'compaction':
    case 'tool_addition':
    case 'tool_removal':
    case 'mcp_tool_listing':
    case 'fallback':
      return null;
    default:
      if (SERVER_BLOCKS.has(String(block.type))) {
        const idField = block.type === 'server_tool_use' || block.type === 'mcp_tool_use' ? 'id' : 'tool_use_id';
        return typeof block[idField] === 'string' ? null : `${at}.${idField}: Field required`;
      }
      return `${at}.type: Input tag '${String(block.type)}' does not match any of the expected tags`;
  }
}

/** Blocks of server tools (and MCP) carried back in later turns. */
const SERVER_BLOCKS = new Set(['server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', 'advisor_tool_result', 'code_execution_tool_result', 'bash_code_execution_tool_result', 'text_editor_code_execution_tool_result', 'tool_search_tool_result', 'mcp_tool_use', 'mcp_tool_result']);

/** Anthropic-defined tool types: a family and its version date (tool search also bare). */
const VENDOR_TOOL = /^(bash|code_execution|computer|computer_toolset|browser_toolset|memory|text_editor|web_search|web_fetch|advisor|tool_search_tool_bm25|tool_search_tool_regex|mcp_toolset)(_\d{8})?$/;

function checkTools(tools: unknown): { names: string[] } | string {
  if (tools === undefined || tools === null) return { names: [] };
  if (!Array.isArray(tools)) return 'tools: Input should be a valid list';
  const names: string[] = [];
  for (let i = 0; i < tools.length; i++) {
    const tool: unknown = tools[i];
    if (!isRecord(tool)) return `tools.${i}: Input should be an object`;
    const custom = tool.type === undefined || tool.type === null || tool.type === 'custom';
    if (!custom && !(typeof tool.type === 'string' && VENDOR_TOOL.test(tool.type))) return `tools.${i}.type: Input tag '${String(tool.type)}' does not match any of the expected tags`;
    // toolsets (computer, browser, MCP) have no name of their own
    const named = custom || !/toolset/.test(String(tool.type));
    if (named && (typeof tool.name !== 'string' || tool.name.length === 0)) return `tools.${i}.name: Field required`;
    if (custom && !isRecord(tool.input_schema)) return `tools.${i}.input_schema: Field required`;
    if (custom) names.push(String(tool.name));
  }
  return { names };
}

function checkOptions(body: Record<string, unknown>): Check {
  const { tool_choice: choice, stop_sequences: stop } = body;
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') return 'stream: Input should be a valid boolean';
  if (stop !== undefined && stop !== null && !(Array.isArray(stop) && stop.every((s) => typeof s === 'string'))) {
    return 'stop_sequences: Input should be a valid list of strings';
  }
  if (choice !== undefined && choice !== null) {
    if (!isRecord(choice) || !['auto', 'any', 'tool', 'none'].includes(String(choice.type))) {
      return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'";
    }
    if (choice.type === 'tool' && typeof choice.name !== 'string') return 'tool_choice.name: Field required';
  }
  if (!numberIn(body.temperature, 0, 1)) return 'temperature: Input should be a number between 0 and 1';
  if (!numberIn(body.top_p, 0, 1)) return 'top_p: Input should be a number between 0 and 1';
  if (!numberIn(body.top_k, 0, Number.MAX_SAFE_INTEGER) || (typeof body.top_k === 'number' && !Number.isInteger(body.top_k))) {
    return 'top_k: Input should be a non-negative integer';
  }
  for (const name of ['metadata', 'thinking'] as const) {
    const value = body[name];
    if (value !== undefined && value !== null && !isRecord(value)) return `${name}: Input should be an object`;
  }
  const thinking = body.thinking;
  if (isRecord(thinking)) {
    if (!['enabled', 'disabled', 'adaptive', 'between_tools'].includes(String(thinking.type))) return "thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'";
    if (thinking.type === 'enabled' && !(typeof thinking.budget_tokens === 'number' && Number.isInteger(thinking.budget_tokens) && thinking.budget_tokens >= 1)) return 'thinking.budget_tokens: Field required';
  }
  const config = body.output_config;
  if (config !== undefined && config !== null) {
    if (!isRecord(config)) return 'output_config: Input should be an object';
    if (config.effort != null && !EFFORTS.includes(String(config.effort))) return `output_config.effort: Input should be ${EFFORTS.map((e) => `'${e}'`).join(', ')}`;
    if (config.format != null && !(isRecord(config.format) && config.format.type === 'json_schema' && isRecord(config.format.schema))) return "output_config.format: Input should be {type: 'json_schema', schema}";
  }
  const unknown = Object.keys(body).find((k) => !FIELDS.has(k));
  return unknown === undefined ? null : `${unknown}: Extra inputs are not permitted`;
}

const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'];

/** Top-level fields of the current Messages API, beta ones included (the SDK's request types). */
const FIELDS = new Set([
  'model', 'max_tokens', 'messages', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k', 'tools', 'tool_choice',
  'metadata', 'thinking', 'service_tier', 'output_config', 'output_format', 'cache_control', 'container', 'diagnostics',
  'inference_geo', 'speed', 'user_profile_id', 'workspace_id', 'context_management', 'mcp_servers', 'compaction',
  'billing_policy', 'fallbacks', 'fallback_credit_token', 'thread',
]);

/**
 * System prompt text: a string or text blocks; null when absent. A system message inside
 * `messages` (`at` its path) may also carry tool changes (beta), which count no text.
 */
function systemText(system: unknown, at = 'system'): string | null | { error: string } {
  if (system === undefined || system === null) return null;
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) return { error: `${at}: Input should be a valid string or list of text blocks` };
  for (let i = 0; i < system.length; i++) {
    const block: unknown = system[i];
    const toolChange = at !== 'system' && isRecord(block) && (block.type === 'tool_addition' || block.type === 'tool_removal');
    if (!toolChange && (!isRecord(block) || block.type !== 'text' || typeof block.text !== 'string')) {
      return { error: `${at}.${i}: Input should be a text block` };
    }
  }
  return partsText(system);
}

export function parseMessagesRequest(body: unknown): Parsed<MessagesRequest> {
  if (!isRecord(body)) return fail('Request body must be a JSON object.', 'body');
  const { model, messages, max_tokens: maxTokens } = body;
  if (typeof model !== 'string' || model.length === 0) return fail('model: Field required', 'model');
  if (maxTokens === undefined || maxTokens === null) return fail('max_tokens: Field required', 'max_tokens');
  if (typeof maxTokens !== 'number' || !optionalPositiveInt(maxTokens)) {
    return fail('max_tokens: Input should be an integer of at least 1', 'max_tokens');
  }
  if (!Array.isArray(messages) || messages.length === 0) return fail('messages: at least one message is required', 'messages');
  const options = checkOptions(body);
  if (options !== null) return fail(options, options.slice(0, options.indexOf(':')));
  const tools = checkTools(body.tools);
  if (typeof tools === 'string') return fail(tools, 'tools');
  const system = systemText(body.system);
  if (isRecord(system)) return fail(system.error, 'system');

  // Counted text: the system prompt, text blocks and tool_result contents (images count zero).
  const texts: string[] = system ? [system] : [];
  let lastUserText = '';
  let toolResult: string | null = null;
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i];
    const at = `messages.${i}`;
    if (!isRecord(message)) return fail(`${at}: Input should be an object`, at);
    const { role, content } = message;
    if (role !== 'user' && role !== 'assistant' && role !== 'system') return fail(`${at}.role: Input should be 'user', 'assistant' or 'system'`, `${at}.role`);
    if (role === 'system') {
      // mid-conversation instructions: counted, not a turn of the user's
      const text = systemText(message.content, `${at}.content`);
      if (isRecord(text)) return fail(text.error, `${at}.content`);
      texts.push(text ?? '');
      continue;
    }
    if (typeof content !== 'string' && !Array.isArray(content)) return fail(`${at}.content: Field required`, `${at}.content`);
    const blocks: unknown[] = typeof content === 'string' ? [{ type: 'text', text: content }] : content;
    let text = ''; // text blocks
    let counted = ''; // text blocks and tool results, in order
    const results: string[] = [];
    for (let j = 0; j < blocks.length; j++) {
      const block = blocks[j];
      const problem = checkBlock(block, role, `${at}.content.${j}`);
      if (problem !== null) return fail(problem, `${at}.content`);
      if (!isRecord(block)) continue;
      if (block.type === 'text' && typeof block.text === 'string') {
        text += block.text;
        counted += block.text;
      } else if (block.type === 'tool_result') {
        const result = toolResultText(block.content, `${at}.content.${j}`);
        if ('error' in result) return fail(result.error, `${at}.content`);
        results.push(result.text);
        counted += result.text;
      }
    }
    texts.push(counted);
    // A user turn made only of tool results is the tool's turn, not the user's.
    if (role === 'user' && (results.length === 0 || text.length > 0)) lastUserText = text;
    toolResult = role === 'user' && results.length > 0 ? results.join('\n') : null;
  }
  const chars = texts.reduce((n, t) => n + t.length, 0);
  const stop = Array.isArray(body.stop_sequences) ? body.stop_sequences : [];
  return {
    ok: true,
    request: {
      model,
      stream: body.stream === true,
      maxTokens,
      allText: texts.join('\n'),
      lastUserText,
      // Exactly the chat rule: ~4 characters a token plus 4 per message; a non-empty system prompt is one.
      promptTokens: Math.ceil(chars / 4) + 4 * (messages.length + (system ? 1 : 0)),
      toolResult,
      tools: tools.names,
      stop: stop.filter((s): s is string => typeof s === 'string' && s.length > 0),
    },
  };
}
