// Validation of Gemini API requests (POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent) into the format-neutral GenRequest. Field names are the REST API's
// camelCase JSON (what Google's clients send); errors read as Google's do (`Invalid JSON payload…`).
import type { GenRequest } from './completion';
import type { Parsed } from './endpoint';
import { isRecord, numberIn, optionalPositiveInt } from './text';

export interface GeminiRequest extends GenRequest {
  /** thinkingConfig.includeThoughts: thought summaries come back as `thought: true` parts */
  includeThoughts: boolean;
}

const fail = (message: string, param: string): Parsed<GeminiRequest> => ({ ok: false, message, param });

/** Top-level fields of GenerateContentRequest (the model is in the path). */
const FIELDS = new Set(['contents', 'systemInstruction', 'generationConfig', 'tools', 'toolConfig', 'safetySettings', 'cachedContent', 'labels', 'model']);

/** Fields of GenerationConfig. */
const CONFIG_FIELDS = new Set([
  'stopSequences', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'responseModalities', 'candidateCount', 'maxOutputTokens',
  'temperature', 'topP', 'topK', 'seed', 'presencePenalty', 'frequencyPenalty', 'responseLogprobs', 'logprobs', 'enableEnhancedCivicAnswers',
  'speechConfig', 'thinkingConfig', 'imageConfig', 'mediaResolution',
]);

const PART_KINDS = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult'];

/** Text a part counts: its text, or a function response's `output` (its JSON otherwise). */
function partText(part: Record<string, unknown>): string {
  if (typeof part.text === 'string') return part.text;
  const response = isRecord(part.functionResponse) ? part.functionResponse.response : undefined;
  if (isRecord(response)) return typeof response.output === 'string' ? response.output : JSON.stringify(response);
  return '';
}

function checkPart(part: unknown, role: string, at: string): string | null {
  if (!isRecord(part)) return `Invalid value at '${at}': expected an object`;
  const kinds = PART_KINDS.filter((k) => part[k] !== undefined);
  if (kinds.length !== 1) return `Invalid value at '${at}': a part holds exactly one of ${PART_KINDS.join(', ')}`;
  const kind = kinds[0];
  if (kind === 'text' && typeof part.text !== 'string') return `Invalid value at '${at}.text' (TYPE_STRING)`;
  if (kind === 'inlineData' && !(isRecord(part.inlineData) && typeof part.inlineData.mimeType === 'string' && typeof part.inlineData.data === 'string')) return `* GenerateContentRequest.${at}.inline_data: mime_type and data are required`;
  if (kind === 'fileData' && !(isRecord(part.fileData) && typeof part.fileData.fileUri === 'string')) return `* GenerateContentRequest.${at}.file_data.file_uri: a file URI is required`;
  if (kind === 'functionCall') {
    if (role !== 'model') return `* GenerateContentRequest.${at}.function_call: only model turns call functions`;
    if (!(isRecord(part.functionCall) && typeof part.functionCall.name === 'string')) return `* GenerateContentRequest.${at}.function_call.name: Name cannot be empty.`;
  }
  if (kind === 'functionResponse') {
    const r = part.functionResponse;
    if (!(isRecord(r) && typeof r.name === 'string' && r.name)) return `* GenerateContentRequest.${at}.function_response.name: Name cannot be empty.`;
    if (!isRecord(r.response)) return `* GenerateContentRequest.${at}.function_response.response: a JSON object is required`;
  }
  return null;
}

function toolNames(tools: unknown): string[] | string {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) return "Invalid value at 'tools' (type.googleapis.com/google.ai.generativelanguage.v1beta.Tool), expected a list";
  const names: string[] = [];
  for (let i = 0; i < tools.length; i++) {
    const tool: unknown = tools[i];
    if (!isRecord(tool)) return `Invalid value at 'tools[${i}]': expected an object`;
    const decls = tool.functionDeclarations;
    if (decls === undefined) continue; // googleSearch, codeExecution, urlContext…: built-in tools
    if (!Array.isArray(decls)) return `Invalid value at 'tools[${i}].function_declarations': expected a list`;
    for (let j = 0; j < decls.length; j++) {
      const d: unknown = decls[j];
      if (!isRecord(d) || typeof d.name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$/.test(d.name)) {
        return `* GenerateContentRequest.tools[${i}].function_declarations[${j}].name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 128.`;
      }
      if (d.parameters !== undefined && d.parametersJsonSchema !== undefined) return `* GenerateContentRequest.tools[${i}].function_declarations[${j}]: parameters and parameters_json_schema are mutually exclusive`;
      names.push(d.name);
    }
  }
  return names;
}

function checkConfig(config: unknown): string | null {
  if (config === undefined || config === null) return null;
  if (!isRecord(config)) return "Invalid value at 'generation_config': expected an object";
  const unknown = Object.keys(config).find((k) => !CONFIG_FIELDS.has(k));
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}" at 'generation_config': Cannot find field.`;
  if (typeof config.maxOutputTokens === 'number' ? !optionalPositiveInt(config.maxOutputTokens) : config.maxOutputTokens != null) return "Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32)";
  if (!numberIn(config.temperature, 0, 2)) return '* GenerateContentRequest.generation_config.temperature: must be in [0.0, 2.0]';
  if (!numberIn(config.topP, 0, 1)) return '* GenerateContentRequest.generation_config.top_p: must be in [0.0, 1.0]';
  const stop = config.stopSequences;
  if (stop !== undefined && stop !== null) {
    if (!Array.isArray(stop) || !stop.every((s) => typeof s === 'string')) return "Invalid value at 'generation_config.stop_sequences' (TYPE_STRING)";
    if (stop.length > 5) return '* GenerateContentRequest.generation_config.stop_sequences: at most 5 stop sequences';
  }
  if (config.responseSchema != null && config.responseJsonSchema != null) return '* GenerateContentRequest.generation_config: response_schema and response_json_schema are mutually exclusive';
  const schema = config.responseSchema ?? config.responseJsonSchema;
  if (schema != null && config.responseMimeType !== 'application/json' && config.responseMimeType !== 'text/x.enum') {
    return '* GenerateContentRequest.generation_config.response_mime_type: When using a response schema, response_mime_type must be application/json or text/x.enum';
  }
  return null;
}

export function parseGeminiRequest(body: unknown, model: string): Parsed<GeminiRequest> {
  if (!isRecord(body)) return fail('Invalid JSON payload received. Expected an object.', 'body');
  const unknown = Object.keys(body).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) return fail(`Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`, unknown);
  const { contents } = body;
  if (!Array.isArray(contents) || contents.length === 0) return fail('* GenerateContentRequest.contents: contents is not specified', 'contents');
  const config = checkConfig(body.generationConfig);
  if (config !== null) return fail(config, 'generationConfig');
  const tools = toolNames(body.tools);
  if (typeof tools === 'string') return fail(tools, 'tools');
  let system = '';
  if (body.systemInstruction !== undefined && body.systemInstruction !== null) {
    const si = body.systemInstruction;
    if (!isRecord(si) || !Array.isArray(si.parts)) return fail("Invalid value at 'system_instruction': expected a Content with parts", 'systemInstruction');
    system = si.parts.map((p) => (isRecord(p) ? partText(p) : '')).join('');
  }
  const texts: string[] = system ? [system] : [];
  let lastUserText = '';
  let toolResult: string | null = null;
  for (let i = 0; i < contents.length; i++) {
    const content: unknown = contents[i];
    const at = `contents[${i}]`;
    if (!isRecord(content) || !Array.isArray(content.parts) || content.parts.length === 0) return fail(`* GenerateContentRequest.${at}.parts: contents.parts must not be empty.`, at);
    const role = content.role ?? 'user';
    if (role !== 'user' && role !== 'model') return fail(`* GenerateContentRequest.${at}.role: Please use a valid role: user, model.`, `${at}.role`);
    let text = '';
    const results: string[] = [];
    for (let j = 0; j < content.parts.length; j++) {
      const part: unknown = content.parts[j];
      const problem = checkPart(part, role, `${at}.parts[${j}]`);
      if (problem !== null) return fail(problem, `${at}.parts`);
      const p = part as Record<string, unknown>;
      if (typeof p.text === 'string') text += p.text;
      if (p.functionResponse !== undefined) results.push(partText(p));
    }
    texts.push(text + results.join(''));
    if (role === 'user' && (results.length === 0 || text.length > 0)) lastUserText = text;
    toolResult = role === 'user' && results.length > 0 ? results.join('\n') : null;
  }
  const chars = texts.reduce((n, t) => n + t.length, 0);
  const gc = isRecord(body.generationConfig) ? body.generationConfig : {};
  const thinking = isRecord(gc.thinkingConfig) ? gc.thinkingConfig : {};
  return {
    ok: true,
    request: {
      model,
      maxTokens: typeof gc.maxOutputTokens === 'number' ? gc.maxOutputTokens : undefined,
      allText: texts.join('\n'),
      lastUserText,
      // The chat rule: ~4 characters a token plus 4 per content; a non-empty system instruction is one.
      promptTokens: Math.ceil(chars / 4) + 4 * (contents.length + (system ? 1 : 0)),
      toolResult,
      tools,
      stop: Array.isArray(gc.stopSequences) ? gc.stopSequences.filter((s): s is string => typeof s === 'string' && s.length > 0) : [],
      includeThoughts: thinking.includeThoughts === true,
    },
  };
}
