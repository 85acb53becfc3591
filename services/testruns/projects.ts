import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { caseInputSchema, configurationInputSchema, TEST_RUN_TASK_QUEUE, type CaseInput } from '../../domain/testruns/runs';
import { hashKey, keyFormatOf, type KeyFormat } from '../keys/key-format';
import { Conflict, InvalidInput, NotFound } from '../shared/errors';
import type { Db } from '../../platform/db';
import { seal } from '../../platform/secret-box';
import { createKey, uuid } from '../keys/keys';

// Test-run projects, their cases, configurations and CI tokens: shared by the admin CLI
// (admin/testrun-commands.ts) and the test-run API (api/testruns/).

/** A name that is already taken. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string) => UUID.test(s);

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

// ---- projects ----

export const projectInput = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/, 'must be 1-100 letters, digits, _ . -'),
    /** an existing gateway key the cases are sent with (kept sealed, never shown again) */
    gatewayKey: z.string().min(1).optional(),
    /** or: the account a new gateway key is created for */
    accountId: uuid.optional(),
    keyFormat: z.enum(['gw_ai', 'rk_live', 'mt']).optional(),
    maxConcurrency: z.coerce.number().int().min(1).max(1000).optional(),
    taskQueue: z.string().min(1).max(200).optional(),
  })
  .strict();

interface ProjectRow {
  id: string;
  name: string;
  gateway_key_id: string;
  max_concurrency: number;
  task_queue: string;
  created_at: Date;
}

export function projectView(p: ProjectRow, key?: { key_prefix: string; account_id: string } | null) {
  return {
    id: p.id,
    name: p.name,
    gateway_key_id: p.gateway_key_id,
    gateway_key_prefix: key?.key_prefix ?? null,
    account_id: key?.account_id ?? null,
    max_concurrency: p.max_concurrency,
    task_queue: p.task_queue,
    created_at: iso(p.created_at),
  };
}

/** The gateway key of a project: an existing one (checked) or a new one for the account. */
async function gatewayKeyFor(db: Db, label: string, input: { gatewayKey?: string; accountId?: string; keyFormat?: KeyFormat }) {
  if (input.gatewayKey) {
    if (input.accountId) throw new InvalidInput('account', 'give either --gateway-key or --account, not both');
    if (!keyFormatOf(input.gatewayKey)) throw new InvalidInput('gateway-key', 'is not a gateway key (gw_ai_…, rk_live_… or mt-…)');
    const row = await db('api_keys').where({ key_hash: hashKey(input.gatewayKey) }).whereNull('revoked_at').first('id');
    if (!row) throw new InvalidInput('gateway-key', 'is not an active key of this gateway');
    return { id: row.id as string, key: input.gatewayKey };
  }
  if (!input.accountId) throw new InvalidInput('account', 'give --account (a gateway key is created for the project) or --gateway-key');
  const k = await createKey(db, { accountId: input.accountId, label, format: input.keyFormat ?? 'gw_ai' });
  return { id: k.id, key: k.key };
}

export async function createProject(db: Db, input: z.input<typeof projectInput>, sealingKey: Buffer) {
  const p = projectInput.parse(input);
  if (await db('test_projects').where({ name: p.name }).first('id')) throw new Conflict(`a project named ${p.name} exists`);
  const key = await gatewayKeyFor(db, `testrun:${p.name}`, p);
  const [row] = await db('test_projects')
    .insert({
      name: p.name,
      gateway_key_id: key.id,
      gateway_key_sealed: seal(sealingKey, key.key),
      max_concurrency: p.maxConcurrency ?? 4,
      task_queue: p.taskQueue ?? TEST_RUN_TASK_QUEUE,
    })
    .returning('*');
  return getProject(db, row.id);
}

export const projectUpdate = projectInput.omit({ name: true }).partial();

/** Changes limits, the task queue, or the gateway key (a given one, or a new one for --account). */
export async function updateProject(db: Db, id: string, input: z.input<typeof projectUpdate>, sealingKey: Buffer) {
  const p = projectUpdate.parse(input);
  const current = await findProject(db, id);
  const change: Record<string, unknown> = {};
  if (p.maxConcurrency !== undefined) change.max_concurrency = p.maxConcurrency;
  if (p.taskQueue !== undefined) change.task_queue = p.taskQueue;
  if (p.gatewayKey || p.accountId) {
    const key = await gatewayKeyFor(db, `testrun:${current.name}`, p);
    change.gateway_key_id = key.id;
    change.gateway_key_sealed = seal(sealingKey, key.key);
  }
  if (Object.keys(change).length > 0) await db('test_projects').where({ id: current.id }).update(change);
  return getProject(db, current.id);
}

/** A project by id or name. */
export async function findProject(db: Db, ref: string): Promise<ProjectRow> {
  const row = await db('test_projects')
    .where(isUuid(ref) ? { id: ref } : { name: ref })
    .first('id', 'name', 'gateway_key_id', 'max_concurrency', 'task_queue', 'created_at');
  if (!row) throw new NotFound(`project ${ref} not found`);
  return row;
}

export async function getProject(db: Db, ref: string) {
  const p = await findProject(db, ref);
  const key = await db('api_keys').where({ id: p.gateway_key_id }).first('key_prefix', 'account_id');
  return projectView(p, key);
}

export async function listProjects(db: Db) {
  const rows: ProjectRow[] = await db('test_projects').orderBy('name');
  return rows.map((r) => projectView(r));
}

// ---- cases ----

interface CaseRow {
  id: string;
  project_id: string;
  name: string;
  description: string;
  request: unknown;
  assertions: unknown;
  tags: string[];
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

export function caseView(c: CaseRow) {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    request: c.request,
    assertions: c.assertions,
    tags: c.tags,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
    archived_at: iso(c.archived_at),
  };
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

export async function addCase(db: Db, projectId: string, input: CaseInput) {
  const c = caseInputSchema.parse(input);
  try {
    const [row] = await db('test_cases')
      .insert({ project_id: projectId, name: c.name, description: c.description ?? '', request: c.request, assertions: c.assertions, tags: c.tags })
      .returning('*');
    return caseView(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw new Conflict(`a case named ${c.name} exists in this project`);
    throw err;
  }
}

/** A case of the project by id or name (archived ones included). */
export async function findCase(db: Db, projectId: string, ref: string): Promise<CaseRow> {
  const row = await db('test_cases')
    .where({ project_id: projectId })
    .andWhere(isUuid(ref) ? { id: ref } : { name: ref })
    .first();
  if (!row) throw new NotFound(`case ${ref} not found in this project`);
  return row;
}

/** Replaces a case's definition (and un-archives it). Runs keep the snapshot they were created with. */
export async function replaceCase(db: Db, projectId: string, ref: string, input: CaseInput) {
  const current = await findCase(db, projectId, ref);
  const c = caseInputSchema.parse(input);
  try {
    const [row] = await db('test_cases')
      .where({ id: current.id })
      .update({ name: c.name, description: c.description ?? '', request: c.request, assertions: c.assertions, tags: c.tags, updated_at: db.fn.now(), archived_at: null })
      .returning('*');
    return caseView(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw new Conflict(`a case named ${c.name} exists in this project`);
    throw err;
  }
}

export async function archiveCase(db: Db, projectId: string, ref: string) {
  const current = await findCase(db, projectId, ref);
  const [row] = await db('test_cases').where({ id: current.id }).update({ archived_at: db.raw('COALESCE(archived_at, now())') }).returning('*');
  return caseView(row);
}

export async function listCases(db: Db, projectId: string, opts: { tag?: string; archived?: boolean } = {}) {
  const q = db('test_cases').where({ project_id: projectId }).orderBy('name');
  if (!opts.archived) q.whereNull('archived_at');
  if (opts.tag) q.whereRaw('? = ANY(tags)', [opts.tag]);
  return ((await q) as CaseRow[]).map(caseView);
}

// ---- configurations ----

interface ConfigurationRow {
  id: string;
  name: string;
  settings: unknown;
  created_at: Date;
  updated_at: Date;
}

export const configurationView = (c: ConfigurationRow) => ({ id: c.id, name: c.name, settings: c.settings, created_at: iso(c.created_at), updated_at: iso(c.updated_at) });

/** Creates a named configuration; with `replace`, an existing one of that name is replaced. */
export async function setConfiguration(db: Db, projectId: string, input: z.input<typeof configurationInputSchema>, opts: { replace: boolean }) {
  const c = configurationInputSchema.parse(input);
  const q = db('test_configurations').insert({ project_id: projectId, name: c.name, settings: c.settings }).onConflict(['project_id', 'name']);
  const rows = opts.replace ? await q.merge({ settings: c.settings, updated_at: db.fn.now() }).returning('*') : await q.ignore().returning('*');
  if (rows.length === 0) throw new Conflict(`a configuration named ${c.name} exists in this project`);
  return configurationView(rows[0]);
}

export async function findConfiguration(db: Db, projectId: string, ref: string): Promise<ConfigurationRow> {
  const row = await db('test_configurations')
    .where({ project_id: projectId })
    .andWhere(isUuid(ref) ? { id: ref } : { name: ref })
    .first();
  if (!row) throw new NotFound(`configuration ${ref} not found in this project`);
  return row;
}

export async function listConfigurations(db: Db, projectId: string) {
  return ((await db('test_configurations').where({ project_id: projectId }).orderBy('name')) as ConfigurationRow[]).map(configurationView);
}

// ---- CI tokens ----

const TOKEN_PREFIX = 'trk_';
/** `trk_` + 43 characters of base64url. */
export const CI_TOKEN_FORMAT = /^trk_[A-Za-z0-9_-]{43}$/;
export const hashCiToken = (token: string) => createHash('sha256').update(token).digest('hex');

interface TokenRow {
  id: string;
  project_id: string;
  token_prefix: string;
  label: string;
  created_at: Date;
  revoked_at: Date | null;
}

const tokenView = (t: TokenRow) => ({ id: t.id, project_id: t.project_id, token_prefix: t.token_prefix, label: t.label, created_at: iso(t.created_at), revoked_at: iso(t.revoked_at) });

/** A new CI token for the project; the token itself is in this answer only. */
export async function createCiToken(db: Db, projectRef: string, label = '') {
  const p = await findProject(db, projectRef);
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const [row] = await db('test_ci_tokens')
    .insert({ project_id: p.id, token_hash: hashCiToken(token), token_prefix: token.slice(0, 10), label })
    .returning('*');
  return { ...tokenView(row), token };
}

export async function listCiTokens(db: Db, projectRef: string) {
  const p = await findProject(db, projectRef);
  return ((await db('test_ci_tokens').where({ project_id: p.id }).orderBy('created_at')) as TokenRow[]).map(tokenView);
}

export async function revokeCiToken(db: Db, id: string) {
  uuid.parse(id);
  const [row] = await db('test_ci_tokens').where({ id }).whereNull('revoked_at').update({ revoked_at: db.fn.now() }).returning('*');
  if (!row) throw new NotFound(`active CI token ${id} not found`);
  return tokenView(row);
}

/** The project of an active CI token, or null. */
export async function ciTokenProject(db: Db, token: string): Promise<{ tokenId: string; project: ProjectRow } | null> {
  if (!CI_TOKEN_FORMAT.test(token)) return null;
  const row = await db('test_ci_tokens as t')
    .join('test_projects as p', 'p.id', 't.project_id')
    .where({ 't.token_hash': hashCiToken(token) })
    .whereNull('t.revoked_at')
    .first('t.id as token_id', 'p.id', 'p.name', 'p.gateway_key_id', 'p.max_concurrency', 'p.task_queue', 'p.created_at');
  if (!row) return null;
  const { token_id, ...project } = row;
  return { tokenId: token_id, project };
}
