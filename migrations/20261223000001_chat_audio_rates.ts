import type { Knex } from 'knex';

// Chat audio tokens have rates of their own (spec 1 section 4.7 item 4). They are tariff data
// like the four text multipliers: on the model, and copied into the reservation at hold time
// (spec 2.1 rule 1). Null: audio tokens are billed at the text rate of the same direction.
const CREDITS = [38, 12] as const;
const RATES = ['audio_input_multiplier', 'audio_output_multiplier'] as const;

export async function up(knex: Knex): Promise<void> {
  for (const table of ['models', 'reservations']) {
    await knex.schema.alterTable(table, (t) => {
      for (const rate of RATES) t.decimal(rate, ...CREDITS);
    });
  }
  // The rates were kept in details until now.
  await knex.raw(`UPDATE models SET
      audio_input_multiplier = (details->>'audio_input_multiplier')::numeric,
      audio_output_multiplier = (details->>'audio_output_multiplier')::numeric,
      details = details - 'audio_input_multiplier' - 'audio_output_multiplier'
    WHERE details->>'audio_input_multiplier' IS NOT NULL OR details->>'audio_output_multiplier' IS NOT NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE models SET details = details || jsonb_strip_nulls(jsonb_build_object(
      'audio_input_multiplier', trim_scale(audio_input_multiplier)::text,
      'audio_output_multiplier', trim_scale(audio_output_multiplier)::text))
    WHERE audio_input_multiplier IS NOT NULL OR audio_output_multiplier IS NOT NULL`);
  for (const table of ['models', 'reservations']) {
    await knex.schema.alterTable(table, (t) => {
      for (const rate of RATES) t.dropColumn(rate);
    });
  }
}
