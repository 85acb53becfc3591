import type { ProviderConfig } from '../endpoints';
import { anthropicMessagesAdapter } from './messages';

// Anthropic's Messages API: text only (chat), so its models serve no media or embeddings route.
// Registered once in providers/index.ts under the kind `anthropic`.

export const anthropic: ProviderConfig = {
  authHeaders: anthropicMessagesAdapter.authHeaders,
  chat: anthropicMessagesAdapter,
};
