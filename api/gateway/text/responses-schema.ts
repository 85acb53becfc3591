import { z } from 'zod';
import { REASONING_EFFORTS } from '../../../providers/canonical';
import { byType, each, typed } from './zod-kit';
import { routingFields } from './routing-schema';

// The OpenAI Responses request as the vendor accepts it (the openai SDK's ResponseCreateParams, plus
// Codex's `client_metadata`). Every top-level name, input item, content part and tool type is known by
// name: an unknown one is refused, every vendor one passes (test/gateway/sdk-schemas-openai.test.ts).
// Inside items and tools only what the translation reads is checked; the rest passes loosely.

/** Item types the translation does not carry (dialects/responses.ts): dropped and listed. */
export const DROPPED_ITEM_TYPES = [
  'file_search_call', 'computer_call', 'computer_call_output', 'web_search_call', 'tool_search_call', 'tool_search_output',
  'additional_tools', 'configuration_update', 'compaction', 'compaction_trigger', 'image_generation_call', 'code_interpreter_call',
  'shell_call', 'shell_call_output', 'apply_patch_call', 'apply_patch_call_output', 'mcp_list_tools', 'mcp_approval_request',
  'mcp_approval_response', 'mcp_call', 'item_reference', 'program', 'program_output',
] as const;

/** Tools the upstream would have to run itself (or needs a model trained on them): dropped and listed. */
export const HOSTED_TOOL_TYPES = [
  'file_search', 'computer', 'computer_use_preview', 'web_search', 'web_search_2025_08_26', 'web_search_preview',
  'web_search_preview_2025_03_11', 'mcp', 'code_interpreter', 'programmatic_tool_calling', 'image_generation', 'shell',
  'tool_search', 'apply_patch',
] as const;

/** tool_choice types naming a hosted tool (or a group the canonical form has no name for). */
const HOSTED_CHOICE_TYPES = [
  'file_search', 'web_search_preview', 'computer', 'computer_use_preview', 'computer_use', 'web_search_preview_2025_03_11',
  'image_generation', 'code_interpreter', 'programmatic_tool_calling', 'apply_patch', 'shell',
] as const;

/** `include` values; encrypted reasoning is never produced here, so it maps to nothing to include */
const INCLUDABLE = [
  'file_search_call.results', 'web_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url',
  'computer_call_output.output.image_url', 'code_interpreter_call.outputs', 'reasoning.encrypted_content', 'message.output_text.logprobs',
] as const;

const str = z.string();
const record = z.record(z.string(), z.unknown());

const contentPart = byType({
  input_text: typed('input_text', { text: str }),
  output_text: typed('output_text', { text: str }),
  refusal: typed('refusal', { refusal: str }),
  input_image: typed('input_image', { image_url: str.nullish(), file_id: str.nullish() }),
  input_file: typed('input_file'),
  // in no vendor schema any more; known only to point to chat completions, which takes audio
  input_audio: typed('input_audio'),
});
const content = z.union([str, z.array(contentPart)]);

const knownItem = byType({
  message: typed('message', { role: z.enum(['user', 'assistant', 'system', 'developer']), content }),
  function_call: typed('function_call', { call_id: str, name: str, arguments: str, namespace: str.nullish() }),
  function_call_output: typed('function_call_output', { call_id: str.nullish(), id: str.nullish(), output: content }),
  custom_tool_call: typed('custom_tool_call', { call_id: str, name: str, input: str, namespace: str.nullish() }),
  custom_tool_call_output: typed('custom_tool_call_output', { call_id: str, output: content }),
  local_shell_call: typed('local_shell_call', { call_id: str, action: record }),
  local_shell_call_output: typed('local_shell_call_output', { id: str, output: str }),
  reasoning: typed('reasoning'),
  ...each(DROPPED_ITEM_TYPES),
});
// A message may leave out its type, and an item_reference too (`{ id }` alone).
const item = z.preprocess((v) => {
  if (!v || typeof v !== 'object' || (v as { type?: unknown }).type != null) return v;
  return { ...v, type: 'role' in v ? 'message' : 'id' in v ? 'item_reference' : undefined };
}, knownItem);

const functionTool = typed('function', { name: str.min(1), description: str.nullish(), parameters: record.nullish(), strict: z.boolean().nullish() });
const customTool = typed('custom', { name: str.min(1), description: str.nullish(), format: record.nullish() });
const tool = byType({
  function: functionTool,
  custom: customTool,
  namespace: typed('namespace', { name: str.min(1), description: str.nullish(), tools: z.array(byType({ function: functionTool, custom: customTool })) }),
  local_shell: typed('local_shell'),
  ...each(HOSTED_TOOL_TYPES),
});

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  byType({
    function: typed('function', { name: str }),
    custom: typed('custom', { name: str }),
    allowed_tools: typed('allowed_tools', { mode: z.enum(['auto', 'required']), tools: z.array(record) }),
    mcp: typed('mcp', { server_label: str.optional() }),
    ...each(HOSTED_CHOICE_TYPES),
  }),
]);

export const responsesRequestSchema = z
  .object({
    model: str.min(1),
    input: z.union([str, z.array(item)]),
    instructions: str.nullish(),
    max_output_tokens: z.number().int().positive().nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_obfuscation: z.boolean().optional() }).loose().nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().min(0).max(1).nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    tools: z.array(tool).optional(),
    tool_choice: toolChoice.optional(),
    parallel_tool_calls: z.boolean().nullish(),
    max_tool_calls: z.number().int().nonnegative().nullish(),
    reasoning: z
      .object({
        effort: z.enum(REASONING_EFFORTS).nullish(),
        summary: z.enum(['auto', 'concise', 'detailed']).nullish(),
        generate_summary: z.enum(['auto', 'concise', 'detailed']).nullish(),
        context: z.enum(['auto', 'current_turn', 'all_turns']).nullish(),
        mode: str.optional(),
      })
      .strict()
      .nullish(),
    text: z.object({ format: z.object({ type: z.enum(['text', 'json_schema', 'json_object']) }).loose().optional(), verbosity: z.enum(['low', 'medium', 'high']).nullish() }).strict().optional(),
    include: z.array(z.enum(INCLUDABLE)).nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    client_metadata: z.record(z.string(), z.unknown()).nullish(),
    user: str.optional(),
    safety_identifier: str.nullish(),
    prompt_cache_key: str.nullish(),
    prompt_cache_retention: z.enum(['in_memory', '24h']).nullish(),
    prompt_cache_options: record.optional(),
    store: z.boolean().nullish(),
    background: z.boolean().nullish(),
    background_options: z.object({ completion_window: z.enum(['soonest', '2h', '8h']).optional(), continuation_id: str.optional() }).strict().nullish(),
    previous_response_id: str.nullish(),
    conversation: z.union([str, z.object({ id: str }).loose()]).nullish(),
    prompt: z.object({ id: str }).loose().nullish(),
    truncation: z.enum(['auto', 'disabled']).nullish(),
    service_tier: str.nullish(),
    context_management: z.array(record).nullish(),
    moderation: record.nullish(),
    access_programs: record.optional(),
    image: record.optional(),
    ...routingFields,
  })
  .strict();

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
export type ResponsesItem = z.infer<typeof knownItem>;
export type ResponsesContentPart = z.infer<typeof contentPart>;
export type ResponsesTool = z.infer<typeof tool>;
export type ResponsesToolChoice = z.infer<typeof toolChoice>;
