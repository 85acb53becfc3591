import type { Knex } from 'knex';

// A website's TLS certificate (spec 2 section 2.6 site, PANEL.md section 2 "TLS when a certificate is
// attached"): the PEM chain as the panel re-encoded it, and the private key sealed with the panel's
// sealing key (platform/secret-box), never stored or returned in clear. Both null: HTTP only.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => {
    t.text('tls_certificate');
    t.text('tls_key_sealed');
    t.timestamp('tls_attached_at', { useTz: true });
  });
  await knex.raw(`ALTER TABLE panel_sites ADD CONSTRAINT panel_sites_tls_pair CHECK ((tls_certificate IS NULL) = (tls_key_sealed IS NULL))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE panel_sites DROP CONSTRAINT panel_sites_tls_pair');
  await knex.schema.alterTable('panel_sites', (t) => {
    t.dropColumn('tls_certificate');
    t.dropColumn('tls_key_sealed');
    t.dropColumn('tls_attached_at');
  });
}
