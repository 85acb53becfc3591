import { anthropicMessagesAdapter } from './anthropic/messages';
import type { UpstreamAdapter } from './canonical';
import { openaiChat } from './openai/chat';

/** Upstream adapters by provider kind (the `kind` column of providers). */
export const ADAPTERS: Record<string, UpstreamAdapter> = {
  openai: openaiChat,
  anthropic: anthropicMessagesAdapter,
};
