import type { UpstreamAdapter } from '../canonical';
import type { ProviderConfig } from '../endpoints';
import { openaiChat } from '../openai/chat';

// Azure OpenAI deployments: OpenAI's chat-completions body (the same translation, providers/openai/chat.ts)
// posted to the deployment the catalog names as the upstream model, with the provider's API
// version and the `api-key` header. Registered once in providers/index.ts under the kind `azure-openai`.

export const azureChat: UpstreamAdapter = {
  ...openaiChat,
  path: (provider, deployment) => `openai/deployments/${encodeURIComponent(deployment)}/chat/completions?api-version=${encodeURIComponent(String(provider.settings.api_version ?? ''))}`,
  authHeaders: (key) => ({ 'api-key': key }),
};

export const azureOpenai: ProviderConfig = {
  authHeaders: azureChat.authHeaders,
  checkSettings: ({ apiVersion }) =>
    apiVersion === undefined
      ? [{ field: 'api-version', message: 'required for kind azure-openai (e.g. 2024-10-21)' }]
      : /^\d{4}-\d{2}-\d{2}(-preview)?$/.test(apiVersion)
        ? []
        : [{ field: 'api-version', message: 'must be an Azure OpenAI API version, YYYY-MM-DD or YYYY-MM-DD-preview' }],
  chat: azureChat,
};
