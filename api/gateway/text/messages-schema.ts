import { z } from 'zod';
import { routingFields } from './routing-schema';

// The Anthropic Messages request (POST /v1/messages and /v1/messages/count_tokens) as the vendor's
// current API takes it, beta fields included (@anthropic-ai/sdk MessageCreateParams and
// BetaMessageCreateParams; test/gateway/sdk-schemas-anthropic.test.ts compares them). Unknown
// top-level and message names are refused by name; the insides of vendor objects the gateway does
// not read pass through for the upstream to judge, their `type` discriminators checked here.

/** Content block types of a user or assistant turn. */
export const BLOCK_TYPES = [
  'text', 'image', 'document', 'search_result', 'thinking', 'redacted_thinking', 'tool_use', 'tool_result',
  'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', 'advisor_tool_result', 'code_execution_tool_result',
  'bash_code_execution_tool_result', 'text_editor_code_execution_tool_result', 'tool_search_tool_result', 'mcp_tool_use',
  'mcp_tool_result', 'container_upload', 'compaction', 'tool_addition', 'tool_removal', 'mcp_tool_listing', 'fallback',
] as const;
/** Block types of a system message inside `messages` (beta: tool changes). */
export const SYSTEM_BLOCK_TYPES = ['text', 'tool_addition', 'tool_removal'] as const;
/** Block types inside a tool_result's content. */
export const TOOL_RESULT_BLOCK_TYPES = ['text', 'image', 'document', 'search_result', 'tool_reference', 'browser_state'] as const;
/**
 * Anthropic-defined tools, by family; a tool's `type` is the family and a version date
 * (`web_search_20250305`), the tool-search ones also bare. Any dated version of a known family is
 * accepted, so a tool version newer than this list still passes to an Anthropic upstream.
 */
export const VENDOR_TOOL_FAMILIES = [
  'bash', 'code_execution', 'computer', 'computer_toolset', 'browser_toolset', 'memory', 'text_editor', 'web_search',
  'web_fetch', 'advisor', 'tool_search_tool_bm25', 'tool_search_tool_regex', 'mcp_toolset',
] as const;
const VENDOR_TOOL = new RegExp(`^(${VENDOR_TOOL_FAMILIES.join('|')})(_\\d{8})?$`);
export const THINKING_TYPES = ['enabled', 'disabled', 'adaptive', 'between_tools'] as const;
export const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'] as const;

const list = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ');
/** an object the upstream reads: its discriminator checked, the rest passed on */
const typed = (types: readonly [string, ...string[]]) => z.object({ type: z.enum(types) }).passthrough();
const vendorObject = z.object({}).passthrough();

const isAudio = (t: unknown) => t === 'input_audio' || t === 'audio';

const textBlock = z.object({ type: z.literal('text'), text: z.string() }).passthrough();
// Plain unions, not discriminatedUnion: zod-openapi cannot document those (api/shared/validate.ts
// still names the accepted discriminator values).
const block = z.union([
  textBlock,
  z.object({ type: z.literal('image'), source: typed(['base64', 'url', 'file']) }).passthrough(),
  z.object({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.record(z.string(), z.unknown()) }).passthrough(),
  z
    .object({
      type: z.literal('tool_result'),
      tool_use_id: z.string(),
      content: z.union([z.string(), z.array(typed(TOOL_RESULT_BLOCK_TYPES))]).optional(),
      is_error: z.boolean().optional(),
    })
    .passthrough(),
  typed(BLOCK_TYPES.filter((t) => !['text', 'image', 'tool_use', 'tool_result'].includes(t)) as [string, ...string[]]),
], {
  // audio parts are the chat dialect's: a pointer there rather than the list of block types
  error: (iss) => (isAudio((iss.input as { type?: unknown } | undefined)?.type) ? 'audio input is served by /v1/chat/completions only' : undefined),
});
const content = z.union([z.string(), z.array(block)]);
const effort = z.enum(EFFORTS);

const message = z.union([
  z.object({ role: z.literal('user'), content }).strict(),
  z.object({ role: z.literal('assistant'), content }).strict(),
  // mid-conversation instructions (Claude Code sends its agent and skill lists this way)
  z
    .object({
      role: z.literal('system'),
      content: z.union([z.string(), z.array(typed(SYSTEM_BLOCK_TYPES))]).optional(),
      clear_at: z.enum(['next_user_message', 'never']).optional(),
      output_config: z.object({ effort: effort.optional() }).passthrough().optional(),
    })
    .strict(),
]);

const tool = z
  .object({ type: z.string().nullish(), name: z.string().optional(), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()).optional() })
  .passthrough()
  .superRefine((t, ctx) => {
    if (t.type === undefined || t.type === null || t.type === 'custom') {
      if (!t.name) ctx.addIssue({ code: 'custom', path: ['name'], message: 'a custom tool needs a name' });
      if (!t.input_schema) ctx.addIssue({ code: 'custom', path: ['input_schema'], message: 'a custom tool needs an input_schema (a JSON schema object)' });
    } else if (!VENDOR_TOOL.test(t.type)) {
      ctx.addIssue({ code: 'custom', path: ['type'], message: `expected 'custom' (or none) or an Anthropic tool type: one of ${list(VENDOR_TOOL_FAMILIES)} with its version date, e.g. 'web_search_20250305'` });
    }
  });

const toolChoice = z.union([
  z.object({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }).strict(),
  z.object({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }).strict(),
  z.object({ type: z.literal('tool'), name: z.string().min(1), disable_parallel_tool_use: z.boolean().optional() }).strict(),
  z.object({ type: z.literal('none') }).strict(),
]);

const thinking = z.union([
  z.object({ type: z.literal('enabled'), budget_tokens: z.number().int().min(1) }).passthrough(),
  z.object({ type: z.literal('adaptive') }).passthrough(),
  z.object({ type: z.literal('disabled') }).passthrough(),
  z.object({ type: z.literal('between_tools') }).passthrough(),
]);

const jsonFormat = z.object({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) }).passthrough();
const outputConfig = z.object({ effort: effort.nullish(), format: jsonFormat.nullish(), task_budget: vendorObject.nullish() }).strict();
const system = z.union([z.string(), z.array(textBlock)]);

/** Fields of both /v1/messages and count_tokens. */
const shared = {
  model: z.string().min(1),
  messages: z.array(message).min(1),
  system: system.optional(),
  tools: z.array(tool).optional(),
  tool_choice: toolChoice.optional(),
  thinking: thinking.optional(),
  output_config: outputConfig.optional(),
  // beta: the structured-outputs predecessor of output_config.format
  output_format: jsonFormat.nullish(),
  cache_control: z.object({ type: z.literal('ephemeral'), ttl: z.enum(['5m', '1h']).optional() }).strict().nullish(),
  speed: z.enum(['standard', 'fast']).nullish(),
  user_profile_id: z.string().nullish(),
  workspace_id: z.string().nullish(),
  // beta fields, passed to an Anthropic upstream as they are
  context_management: z.object({ edits: z.array(typed(['clear_tool_uses_20250919', 'clear_thinking_20251015', 'compact_20260112'])).optional() }).passthrough().nullish(),
  mcp_servers: z.array(z.object({ type: z.literal('url'), name: z.string(), url: z.string() }).passthrough()).nullish(),
  compaction: typed(['summarize']).nullish(),
  billing_policy: typed(['billing_policy']).nullish(),
};

export const messagesRequestSchema = z
  .object({
    ...shared,
    max_tokens: z.number().int().positive(),
    stop_sequences: z.array(z.string()).optional(),
    stream: z.boolean().optional(),
    // no longer in the SDK's types, still sent by older clients
    temperature: z.number().min(0).max(1).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    metadata: z.object({ user_id: z.string().nullish() }).strict().optional(),
    service_tier: z.enum(['auto', 'standard_only']).optional(),
    container: z.union([z.string(), vendorObject]).nullish(),
    diagnostics: z.object({ previous_message_id: z.string().nullish() }).passthrough().nullish(),
    inference_geo: z.string().nullish(),
    fallbacks: z.union([z.literal('default'), z.array(z.object({ model: z.string() }).passthrough())]).nullish(),
    fallback_credit_token: z.union([z.string(), z.object({ token: z.string() }).passthrough()]).nullish(),
    thread: typed(['create', 'continue']).nullish(),
    ...routingFields,
  })
  .strict();

/** count_tokens: the request without the generation controls (no max_tokens, stream, metadata…). */
export const countTokensSchema = z.object(shared).strict();

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;
export type MessagesMessage = MessagesRequest['messages'][number];
export type MessagesBlock = Extract<z.infer<typeof block>, object> & Record<string, unknown>;
