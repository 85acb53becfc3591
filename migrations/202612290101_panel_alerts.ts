import type { Knex } from 'knex';

// Metrics samples, alert rules and alerts, events and webhooks (spec 2 sections 2.6, 3, 4.2, 6):
// - panel_node_samples: one row per node per metrics interval (from the node record its heartbeats
//   and the hosting node's reports write), kept 14 days;
// - panel_alert_rules: changed values of the built-in rules (domain/panel/alerts.ts); a rule
//   without a row has its built-in values;
// - panel_alert_pending: the (rule, subject) pairs whose condition holds now, since when, and
//   whether they fired (the for-time and "fires once per episode");
// - panel_alerts / panel_alert_events: alerts (one not resolved per rule and subject) and their history;
// - panel_events, panel_webhook_endpoints, panel_webhook_deliveries, panel_webhook_attempts.
// An org's alerts, events and endpoints go with the org (deleted only with nothing below it).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_node_samples', (t) => {
    t.text('node_name').notNullable().references('name').inTable('panel_nodes').onDelete('CASCADE');
    t.timestamp('at', { useTz: true }).notNullable();
    t.double('cpu_percent');
    t.double('load1');
    t.double('load5');
    t.double('load15');
    t.double('memory_used_percent');
    t.double('rootfs_used_percent');
    t.bigInteger('uptime_seconds');
    t.bigInteger('rx_bytes');
    t.bigInteger('tx_bytes');
    t.primary(['node_name', 'at']);
    t.index(['at']);
  });
  await knex.schema.createTable('panel_alert_rules', (t) => {
    t.text('key').primary();
    t.double('threshold').notNullable();
    t.integer('for_seconds').notNullable();
    t.integer('reopen_seconds').notNullable();
    t.text('severity').notNullable().checkIn(['warning', 'critical'], 'panel_alert_rules_severity');
    t.boolean('enabled').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('panel_alert_pending', (t) => {
    t.text('rule_key').notNullable();
    t.text('subject').notNullable();
    t.timestamp('since', { useTz: true }).notNullable();
    t.boolean('fired').notNullable().defaultTo(false);
    t.primary(['rule_key', 'subject']);
  });
  await knex.schema.createTable('panel_alerts', (t) => {
    t.uuid('id').primary();
    t.text('rule_key').notNullable();
    t.text('subject').notNullable();
    t.text('node_name');
    t.uuid('site_id');
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs').onDelete('CASCADE');
    t.specificType('org_path', 'text COLLATE "C"').notNullable(); // a subtree's alerts: one index range scan (LIKE prefix)
    t.text('severity').notNullable();
    t.text('state').notNullable().checkIn(['open', 'acknowledged', 'resolved'], 'panel_alerts_state');
    t.text('summary').notNullable();
    t.double('value');
    t.double('threshold');
    t.text('note');
    t.integer('reopened').notNullable().defaultTo(0);
    t.timestamp('opened_at', { useTz: true }).notNullable();
    t.timestamp('fired_at', { useTz: true }).notNullable();
    t.timestamp('acknowledged_at', { useTz: true });
    t.timestamp('resolved_at', { useTz: true });
    t.index(['org_path']);
    t.index(['node_name', 'opened_at']);
    t.index(['rule_key', 'subject', 'resolved_at']);
  });
  await knex.raw(`CREATE UNIQUE INDEX panel_alerts_one_open ON panel_alerts (rule_key, subject) WHERE state <> 'resolved'`);
  await knex.schema.createTable('panel_alert_events', (t) => {
    t.bigIncrements('id');
    t.uuid('alert_id').notNullable().references('id').inTable('panel_alerts').onDelete('CASCADE');
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('kind').notNullable();
    t.text('actor').notNullable();
    t.text('note');
    t.double('value');
    t.index(['alert_id', 'id']);
  });
  await knex.schema.createTable('panel_events', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs').onDelete('CASCADE');
    t.text('type').notNullable();
    t.jsonb('data').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('panel_webhook_endpoints', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs').onDelete('CASCADE');
    t.text('url').notNullable();
    t.specificType('events', 'text[]').notNullable();
    /** the signing secret, sealed (platform/secret-box) */
    t.text('secret_sealed').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('description');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id']);
  });
  await knex.schema.createTable('panel_webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('endpoint_id').notNullable().references('id').inTable('panel_webhook_endpoints').onDelete('CASCADE');
    t.uuid('event_id').notNullable().references('id').inTable('panel_events').onDelete('CASCADE');
    t.text('status').notNullable().defaultTo('pending').checkIn(['pending', 'delivered', 'failed'], 'panel_webhook_deliveries_status');
    t.integer('attempts').notNullable().defaultTo(0);
    /** the redelivery this one repeats */
    t.uuid('redelivery_of');
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['endpoint_id', 'created_at']);
  });
  await knex.raw(`CREATE INDEX panel_webhook_deliveries_unstarted ON panel_webhook_deliveries (created_at) WHERE started_at IS NULL`);
  await knex.schema.createTable('panel_webhook_attempts', (t) => {
    t.bigIncrements('id');
    t.uuid('delivery_id').notNullable().references('id').inTable('panel_webhook_deliveries').onDelete('CASCADE');
    t.integer('attempt').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('status_code');
    t.integer('latency_ms').notNullable();
    t.text('error');
    t.unique(['delivery_id', 'attempt']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['panel_webhook_attempts', 'panel_webhook_deliveries', 'panel_webhook_endpoints', 'panel_events', 'panel_alert_events', 'panel_alerts', 'panel_alert_pending', 'panel_alert_rules', 'panel_node_samples']) {
    await knex.schema.dropTableIfExists(t);
  }
}
