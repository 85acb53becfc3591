import type { Knex } from 'knex';

// The panel's cluster (spec 2 section 2.6, PANEL.md sections 1, 2, 4): node records, written by the
// agents' enrolments and heartbeats and by the controller (state from heartbeat age, one leader
// among panel-api processes), and the operations queued for each node, which its agent pulls.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_nodes', (t) => {
    t.text('name').primary();
    // `hosting`: the panel's own node, driven directly; `agent`: driven by a panel-host agent.
    t.text('kind').notNullable().checkIn(['hosting', 'agent'], 'panel_nodes_kind');
    t.text('token_hash').unique();
    t.boolean('draining').notNullable().defaultTo(false);
    t.text('logical_region');
    t.text('physical_region');
    t.text('zone');
    t.text('cell');
    // Roles the operator labelled; null: the roles the node's facts say it can serve.
    t.specificType('roles', 'text[]');
    t.jsonb('facts');
    t.timestamp('facts_at', { useTz: true });
    t.jsonb('metrics');
    t.timestamp('metrics_at', { useTz: true });
    t.text('boot_id');
    t.timestamp('last_heartbeat_at', { useTz: true });
    t.timestamp('last_pull_at', { useTz: true });
    t.timestamp('agent_started_at', { useTz: true });
    t.integer('agent_restarts').notNullable().defaultTo(0);
    t.integer('agent_reconnects').notNullable().defaultTo(0);
    // Written by the controller's leader from heartbeat age.
    t.text('state').notNullable().defaultTo('alive').checkIn(['alive', 'suspect', 'dead'], 'panel_nodes_state');
    t.timestamp('state_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  // The controller's leader among panel-api processes (the holder of a PostgreSQL advisory lock).
  await knex.schema.createTable('panel_controller', (t) => {
    t.integer('id').primary().checkIn(['1'], 'panel_controller_singleton');
    t.text('leader').notNullable();
    t.timestamp('leader_since', { useTz: true }).notNullable();
    t.timestamp('heartbeat_at', { useTz: true }).notNullable();
  });

  await knex.schema.createTable('panel_node_ops', (t) => {
    t.uuid('id').primary();
    t.text('node_name').notNullable().references('name').inTable('panel_nodes');
    t.uuid('site_id');
    t.text('kind').notNullable();
    // The operation as sent; secrets in it (a new database password) are removed once it is done.
    t.jsonb('payload').notNullable();
    t.text('status').notNullable().defaultTo('queued').checkIn(['queued', 'sent', 'done', 'failed', 'expired'], 'panel_node_ops_status');
    t.jsonb('result');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('sent_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.index(['node_name', 'status', 'created_at']);
    t.index(['site_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_node_ops');
  await knex.schema.dropTable('panel_controller');
  await knex.schema.dropTable('panel_nodes');
}
