import type { ProviderConfig } from '../endpoints';
import { geminiGenerate } from './generate';

// Google's Gemini API: text (chat) only here, so its models serve no media or embeddings route.
// Registered once in providers/index.ts under the kind `gemini`.

export const gemini: ProviderConfig = {
  authHeaders: geminiGenerate.authHeaders,
  chat: geminiGenerate,
};
