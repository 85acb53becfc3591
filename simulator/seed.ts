import type { Db } from '../platform/db';
import { SIMULATOR_MODELS } from './catalog';

/** Registers the simulator as a provider and its models in the catalog (idempotent). */
export async function seedSimulatorCatalog(db: Db, simulatorUrl: string) {
  // One provider per wire format the simulator speaks.
  const providerOf = { openai: 'simulator', anthropic: 'simulator-anthropic', gemini: 'simulator-gemini', 'azure-openai': 'simulator-azure' } as const;
  // the kinds' own settings (providers.settings), as `provider set` stores them
  const settingsOf: Record<string, object> = { 'azure-openai': { api_version: '2024-10-21' } };
  for (const [kind, id] of Object.entries(providerOf)) {
    await db('providers')
      .insert({ id, kind, base_url: simulatorUrl.replace(/\/?$/, '/'), api_keys: ['sim-upstream-key'], credits_per_cost_unit: '1', settings: settingsOf[kind] ?? {} })
      .onConflict('id')
      .merge(['base_url', 'kind', 'settings']);
  }
  for (const { wire, ...m } of SIMULATOR_MODELS) {
    await db('models')
      .insert({ audio_input_multiplier: null, audio_output_multiplier: null, ...m, provider_id: providerOf[wire] })
      .onConflict('id')
      .merge();
  }
  return { providers: Object.values(providerOf), models: SIMULATOR_MODELS.map((m) => m.id) };
}
