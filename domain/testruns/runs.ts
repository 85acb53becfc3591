import { z } from 'zod';
import { jsonSchemaValidator } from './json-schema';

// Test runs (spec 3 B): statuses, the shapes of cases, configurations and run requests, shared by
// the API, the admin CLI, the activities and (as types only) the workflow.

export const TEST_RUN_TASK_QUEUE = 'testruns';
export const testRunWorkflowId = (runId: string) => `test-run-${runId}`;

export const RUN_STATUSES = ['created', 'queued', 'gated', 'running', 'passed', 'failed', 'error', 'timed_out', 'canceled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const FINAL_STATUSES = ['passed', 'failed', 'error', 'timed_out', 'canceled'] as const;
export type FinalStatus = (typeof FINAL_STATUSES)[number];
export const isFinal = (s: string): s is FinalStatus => (FINAL_STATUSES as readonly string[]).includes(s);
export const ACTIVE_STATUSES = ['queued', 'gated', 'running'] as const;

export type CaseStatus = 'passed' | 'failed' | 'errored' | 'not_run';

/** How a run's workflow ended, before the case results decide between passed, failed and error. */
export type RunOutcome = 'completed' | 'timed_out' | 'canceled' | 'error';

export const DIALECT_PATHS = { chat: '/v1/chat/completions', messages: '/v1/messages', responses: '/v1/responses' } as const;
export type Dialect = keyof typeof DIALECT_PATHS;

const name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'must be 1-100 letters, digits, _ . - starting with a letter or digit');
export const nameSchema = name;

const stringList = (item: z.ZodString) => z.union([item.transform((s) => [s]), z.array(item).max(100)]);

/** `host`, `host:port`, `*.domain` or `*.domain:port`; lower-cased. */
export const hostRuleSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+(:\d{1,5})?$|^\[[0-9a-f:.]+\](:\d{1,5})?$/, 'must be host, host:port or *.domain[:port]');

const FORBIDDEN_HEADERS = new Set(['authorization', 'x-api-key', 'api-key', 'host', 'content-length', 'transfer-encoding', 'connection', 'cookie']);

export const caseRequestSchema = z
  .object({
    dialect: z.enum(['chat', 'messages', 'responses']),
    /** the request body exactly as a client of that dialect sends it */
    body: z.record(z.string(), z.unknown()).refine((b) => typeof b.model === 'string' && b.model.length > 0, 'must name a model'),
    /** another deployment to send this case to instead of this gateway (the network gate applies) */
    base_url: z
      .string()
      .url()
      .refine((u) => /^https?:\/\//i.test(u), 'must be an http(s) URL')
      .optional(),
    /** extra request headers, e.g. x-sim-behaviour; never credentials (the project's key is added) */
    headers: z
      .record(z.string(), z.string().max(2000))
      .refine((h) => Object.keys(h).every((k) => !FORBIDDEN_HEADERS.has(k.toLowerCase())), `must not set ${[...FORBIDDEN_HEADERS].join(', ')}`)
      .optional(),
  })
  .strict();
export type CaseRequest = z.infer<typeof caseRequestSchema>;

const decimal = z
  .union([z.string(), z.number()])
  .transform((v) => String(v).trim())
  .pipe(z.string().regex(/^\d{1,24}(\.\d{1,12})?$/, 'must be a non-negative decimal with at most 12 decimals'));

const regexSource = z.string().min(1).max(1000).refine((s) => {
  try {
    new RegExp(s);
    return true;
  } catch {
    return false;
  }
}, 'must be a valid regular expression');

const jsonSchema = z.record(z.string(), z.unknown()).refine((s) => {
  try {
    jsonSchemaValidator(s);
    return true;
  } catch {
    return false;
  }
}, 'must be a JSON schema this server can check (draft 2020-12 / 7 subset)');

export const assertionsSchema = z
  .object({
    /** expected HTTP status; without it any 2xx */
    status: z.number().int().min(100).max(599).optional(),
    contains: stringList(z.string().min(1).max(10_000)).optional(),
    not_contains: stringList(z.string().min(1).max(10_000)).optional(),
    regex: stringList(regexSource).optional(),
    /** the output (the text parsed as JSON, or the first tool call's arguments) must match */
    json_schema: jsonSchema.optional(),
    /** a call to each of these tools must be in the answer */
    tool_call: stringList(z.string().min(1).max(200)).optional(),
    max_latency_ms: z.number().positive().max(3_600_000).optional(),
    /** credits, exact decimal */
    max_cost: decimal.optional(),
  })
  .strict();
export type Assertions = z.output<typeof assertionsSchema>;

export const caseInputSchema = z
  .object({
    name,
    description: z.string().max(2000).optional(),
    request: caseRequestSchema,
    assertions: assertionsSchema.default({}),
    tags: z.array(name).max(50).default([]),
  })
  .strict();
export type CaseInput = z.input<typeof caseInputSchema>;

/** What a run snapshots of each case. */
export interface CaseDefinition {
  request: CaseRequest;
  assertions: Assertions;
  tags: string[];
}

export const configurationSchema = z
  .object({
    /** model ids replaced in every case body; key "*" replaces every model */
    model_overrides: z.record(z.string().min(1).max(200), z.string().min(1).max(200)).optional(),
    /** each case's own timeout: no complete answer within it fails the case */
    case_timeout_seconds: z.number().min(0.1).max(3600).optional(),
    /** from execute to the end of the run; then it is timed_out and unfinished cases not_run */
    deadline_seconds: z.number().min(0.5).max(86_400).optional(),
    /** cases of this run at once (the project's and the global gate still apply) */
    concurrency: z.number().int().min(1).max(100).optional(),
    /** hosts a case may reach besides this gateway: host, host:port, *.domain */
    allowed_hosts: z.array(hostRuleSchema).max(100).optional(),
    /** attempts per case for infrastructure errors; assertion failures are never retried */
    max_attempts: z.number().int().min(1).max(10).optional(),
    /** a worker that stops heartbeating for this long is presumed lost: the case is retried elsewhere */
    heartbeat_timeout_seconds: z.number().min(1).max(600).optional(),
  })
  .strict();
export type ConfigurationInput = z.infer<typeof configurationSchema>;
export type Configuration = Required<ConfigurationInput>;

export const CONFIGURATION_DEFAULTS: Configuration = {
  model_overrides: {},
  case_timeout_seconds: 60,
  deadline_seconds: 1800,
  concurrency: 4,
  allowed_hosts: [],
  max_attempts: 3,
  heartbeat_timeout_seconds: 10,
};

export const configurationInputSchema = z.object({ name, settings: configurationSchema.default({}) }).strict();

export const runCreateSchema = z
  .object({
    /** case ids or names */
    cases: z.array(z.string().min(1).max(100)).min(1).max(1000).optional(),
    /** every active case carrying any of these tags */
    tags: z.array(name).min(1).max(50).optional(),
    /** a stored configuration, by id or name */
    configuration_id: z.string().min(1).max(100).optional(),
    /** settings over the stored configuration (or the defaults) */
    configuration: configurationSchema.optional(),
    label: z.string().max(200).optional(),
  })
  .strict()
  .refine((b) => b.cases !== undefined || b.tags !== undefined, { message: 'select cases by "cases" (ids or names) or "tags"', path: ['cases'] });
export type RunCreateInput = z.infer<typeof runCreateSchema>;

/** The workflow's input: everything it needs, nothing it must read again. */
export interface TestRunInput {
  runId: string;
  projectId: string;
  caseIds: string[];
  concurrency: number;
  caseTimeoutMs: number;
  /** epoch ms: execute time + deadline */
  deadlineAt: number;
  maxAttempts: number;
  heartbeatTimeoutMs: number;
}

export interface CaseCounts {
  total: number;
  passed: number;
  failed: number;
  errored: number;
  not_run: number;
  /** no result yet */
  pending: number;
}

export interface TestRunSummary {
  runId: string;
  status: RunStatus;
  counts: CaseCounts;
}

/**
 * A run passes only if every selected case has a result and all passed. A failed case makes it
 * failed (a definite finding); otherwise an errored or missing result makes it error.
 */
export function runStatusFromCounts(c: CaseCounts): FinalStatus {
  if (c.failed > 0) return 'failed';
  if (c.total === 0 || c.errored > 0 || c.not_run > 0 || c.pending > 0 || c.passed !== c.total) return 'error';
  return 'passed';
}
