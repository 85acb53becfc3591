import { anthropic } from './anthropic';
import { azureOpenai } from './azure-openai';
import { bedrock } from './bedrock';
import type { Endpoint, ProviderConfig, ProviderSettings } from './endpoints';
import { gemini } from './gemini';
import { openai } from './openai';

// The one registry of upstream provider kinds (the `kind` column of providers): a new kind adds
// its folder and one line here. Callers ask for a kind's endpoint; absent means the kind lacks it.

const PROVIDERS = {
  openai,
  anthropic,
  bedrock,
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

/** Problems of a provider's settings for its kind, by field: the kind's own check, else neither region nor API version allowed. */
export function providerSettingsIssues(kind: string, s: ProviderSettings): Array<{ field: string; message: string }> {
  const check = configOf(kind)?.checkSettings;
  const issues = check ? check(s) : [];
  if (kind !== 'bedrock' && s.region !== undefined) issues.push({ field: 'region', message: `a provider of kind ${kind} takes no region (only bedrock does)` });
  if (kind !== 'azure-openai' && s.apiVersion !== undefined) issues.push({ field: 'api-version', message: `a provider of kind ${kind} takes no API version (only azure-openai does)` });
  return issues;
}
