import type { Knex } from 'knex';

// The hot path's inserts (a reservation row and a 'hold' ledger row per hold, 'release' and
// 'charge' rows per settlement) each checked foreign keys on accounts, api_keys and reservations:
// 8 index look-ups and row locks per request (issue 31). They can never fail: accounts and keys
// are never deleted (deactivated, revoked), reservations neither, and services/credits writes
// these rows only from the account and key rows the same statement has just locked and updated
// (credits_take_holds, settlement) or from the reservation row itself. Grants insert ledger rows
// of an account they create or update in the same transaction.
const DROPPED = [
  ['reservations', 'account_id', 'accounts'],
  ['reservations', 'key_id', 'api_keys'],
  ['ledger', 'account_id', 'accounts'],
  ['ledger', 'reservation_id', 'reservations'],
] as const;

export async function up(knex: Knex): Promise<void> {
  for (const [table, column] of DROPPED) await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${table}_${column}_foreign`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, column, target] of DROPPED) {
    await knex.raw(`ALTER TABLE ${table} ADD CONSTRAINT ${table}_${column}_foreign FOREIGN KEY (${column}) REFERENCES ${target}(id)`);
  }
}
