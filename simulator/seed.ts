import type { Db } from '../platform/db';
import { SIMULATOR_MODELS } from './catalog';

/** Registers the simulator as a provider and its models in the catalog (idempotent). */
export async function seedSimulatorCatalog(db: Db, simulatorUrl: string) {
  // One provider per wire format the simulator speaks.
  const providerOf = { openai: 'simulator', anthropic: 'simulator-anthropic' } as const;
  for (const [kind, id] of Object.entries(providerOf)) {
    await db('providers')
      .insert({ id, kind, base_url: simulatorUrl.replace(/\/?$/, '/'), api_keys: ['sim-upstream-key'], credits_per_cost_unit: '1' })
      .onConflict('id')
      .merge(['base_url', 'kind']);
  }
  for (const { wire, ...m } of SIMULATOR_MODELS) {
    await db('models')
      .insert({ audio_input_multiplier: null, audio_output_multiplier: null, ...m, provider_id: providerOf[wire] })
      .onConflict('id')
      .merge();
  }
  return { providers: Object.values(providerOf), models: SIMULATOR_MODELS.map((m) => m.id) };
}
