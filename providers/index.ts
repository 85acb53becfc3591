import { anthropic } from './anthropic';
import { azureOpenai } from './azure-openai';
import type { Endpoint, ProviderConfig } from './endpoints';
import { gemini } from './gemini';
import { openai } from './openai';

// The one registry of upstream provider kinds (the `kind` column of providers): a new kind adds
// its folder and one line here. Callers ask for a kind's endpoint; absent means the kind lacks it.

const PROVIDERS = {
  openai,
  anthropic,
  gemini,
  'azure-openai': azureOpenai,
} satisfies Record<string, ProviderConfig>;

export type ProviderKind = keyof typeof PROVIDERS;
export const PROVIDER_KINDS = Object.keys(PROVIDERS) as [ProviderKind, ...ProviderKind[]];

const configOf = (kind: string): ProviderConfig | undefined => (Object.hasOwn(PROVIDERS, kind) ? PROVIDERS[kind as ProviderKind] : undefined);

/** The endpoint of a provider kind, or undefined when the kind does not offer it. */
export function providerFor<E extends Endpoint>(kind: string, endpoint: E): ProviderConfig[E] | undefined {
  return configOf(kind)?.[endpoint];
}

/** The headers that authenticate a call with `key` to a provider of this kind (none for an unknown kind). */
export const providerAuthHeaders = (kind: string, key: string): Record<string, string> => configOf(kind)?.authHeaders(key) ?? {};
