import type { Knex } from 'knex';

// Test runs for CI release gates (spec 3 B): projects with their cases and configurations, CI
// tokens (hashed), runs with a snapshot of what they execute, one result per case, and the
// leases of the concurrency gate.
const CREDITS = [38, 12] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('test_projects', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('name').notNullable().unique();
    // The gateway key cases are sent with: its row, and the key sealed with TESTRUN_SECRET
    // (AES-256-GCM, platform/secret-box.ts). Never returned by any API or command.
    t.uuid('gateway_key_id').notNullable().references('api_keys.id');
    t.text('gateway_key_sealed').notNullable();
    // Concurrency gate: case executions of this project at once, over all runs and workers.
    t.integer('max_concurrency').notNullable().defaultTo(4);
    // The worker pool (Temporal task queue) that executes this project's runs.
    t.text('task_queue').notNullable().defaultTo('testruns');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('ALTER TABLE test_projects ADD CONSTRAINT test_projects_concurrency_check CHECK (max_concurrency > 0)');

  // A case: one request to the gateway in one of its dialects, and assertions on the answer.
  await knex.schema.createTable('test_cases', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('project_id').notNullable().references('test_projects.id');
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.jsonb('request').notNullable(); // { dialect, body, base_url?, headers? }
    t.jsonb('assertions').notNullable().defaultTo('{}');
    t.specificType('tags', 'text[]').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('archived_at', { useTz: true }); // archived cases stay in old runs' snapshots
    t.unique(['project_id', 'name']);
  });
  await knex.raw('CREATE INDEX test_cases_tags ON test_cases USING gin (tags)');

  await knex.schema.createTable('test_configurations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('project_id').notNullable().references('test_projects.id');
    t.text('name').notNullable();
    t.jsonb('settings').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['project_id', 'name']);
  });

  // CI tokens: only the SHA-256 of a token is stored, as for API keys.
  await knex.schema.createTable('test_ci_tokens', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('project_id').notNullable().references('test_projects.id');
    t.text('token_hash').notNullable().unique();
    t.text('token_prefix').notNullable();
    t.text('label').notNullable().defaultTo('');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    t.index(['project_id']);
  });

  await knex.schema.createTable('test_runs', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('project_id').notNullable().references('test_projects.id');
    t.text('label').notNullable().defaultTo('');
    t.text('status').notNullable().defaultTo('created');
    t.text('reason'); // why a run ended in error, timed_out or canceled
    t.uuid('configuration_id').references('test_configurations.id');
    t.jsonb('configuration').notNullable(); // the effective configuration, frozen at creation
    t.text('idempotency_key');
    t.text('request_hash').notNullable(); // SHA-256 of the creation body, for Idempotency-Key replays
    // First entry into each state; finished_at is the entry into the terminal state.
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('queued_at', { useTz: true });
    t.timestamp('gated_at', { useTz: true });
    t.timestamp('running_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('cancel_requested_at', { useTz: true });
    t.timestamp('deadline_at', { useTz: true }); // set on execute: queued_at + deadline
    t.unique(['project_id', 'idempotency_key']);
    t.index(['project_id', 'created_at']);
  });
  await knex.raw(`ALTER TABLE test_runs ADD CONSTRAINT test_runs_status_check
    CHECK (status IN ('created','queued','gated','running','passed','failed','error','timed_out','canceled'))`);

  // The cases a run selected, as they were when it was created.
  await knex.schema.createTable('test_run_cases', (t) => {
    t.uuid('run_id').notNullable().references('test_runs.id').onDelete('CASCADE');
    t.uuid('case_id').notNullable().references('test_cases.id');
    t.integer('position').notNullable();
    t.text('name').notNullable();
    t.jsonb('definition').notNullable(); // { request, assertions, tags }
    t.integer('attempts').notNullable().defaultTo(0); // execution attempts started (retries included)
    t.primary(['run_id', 'case_id']);
  });

  // One result per case of a run: the primary key makes "reported once" a database rule.
  await knex.schema.createTable('test_case_results', (t) => {
    t.uuid('run_id').notNullable();
    t.uuid('case_id').notNullable();
    t.text('status').notNullable(); // passed | failed | errored | not_run
    t.jsonb('reasons').notNullable().defaultTo('[]');
    t.integer('http_status');
    t.integer('latency_ms');
    t.decimal('cost', ...CREDITS);
    t.text('gateway_request_id');
    t.text('output'); // the answer's text (or tool calls), truncated
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['run_id', 'case_id']);
    t.foreign(['run_id', 'case_id']).references(['run_id', 'case_id']).inTable('test_run_cases').onDelete('CASCADE');
  });
  await knex.raw(`ALTER TABLE test_case_results ADD CONSTRAINT test_case_results_status_check
    CHECK (status IN ('passed','failed','errored','not_run'))`);

  // Concurrency gate: one lease per executing (or about to execute) case. A lease counts while
  // expires_at is in the future; the executing activity renews it with its heartbeats.
  await knex.schema.createTable('test_case_leases', (t) => {
    t.uuid('run_id').notNullable();
    t.uuid('case_id').notNullable();
    t.uuid('project_id').notNullable();
    t.timestamp('acquired_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.primary(['run_id', 'case_id']);
    t.index(['project_id', 'expires_at']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['test_case_leases', 'test_case_results', 'test_run_cases', 'test_runs', 'test_ci_tokens', 'test_configurations', 'test_cases', 'test_projects']) {
    await knex.schema.dropTableIfExists(t);
  }
}
