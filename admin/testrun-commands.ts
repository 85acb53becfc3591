import fs from 'node:fs';
import type { Db } from '../platform/db';
import type { KeyFormat } from '../services/keys/key-format';
import { loadSealingKey } from '../platform/secret-box';
import { InvalidInput } from '../services/shared/errors';
import {
  addCase,
  archiveCase,
  createCiToken,
  createProject,
  findProject,
  getProject,
  listCases,
  listCiTokens,
  listConfigurations,
  listProjects,
  replaceCase,
  revokeCiToken,
  setConfiguration,
  updateProject,
} from '../services/testruns/projects';

// Operator commands of the test runs (README "Test runs"), registered in admin/cli.ts.

type Flags = Record<string, string | undefined>;
type Command = { flags: string[]; run: (db: Db, f: Flags) => Promise<unknown> };

const need = (f: Flags, name: string): string => {
  const v = f[name];
  if (!v) throw new InvalidInput(name, `--${name} is required`);
  return v;
};

/** A JSON flag: inline JSON, or `@path` to a file holding it. */
function json(f: Flags, name: string): unknown {
  const v = f[name];
  if (v === undefined) return undefined;
  let text = v;
  if (v.startsWith('@')) {
    try {
      text = fs.readFileSync(v.slice(1), 'utf8');
    } catch (err) {
      throw new InvalidInput(name, `cannot read ${v.slice(1)}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidInput(name, `--${name} is not valid JSON`);
  }
}

const csv = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((x) => x.trim()).filter(Boolean));

/** A case from --json (the API's case object) with --name, --dialect, --body, --assertions, --tags, --description over it. */
function caseFromFlags(f: Flags) {
  const base = (json(f, 'json') ?? {}) as Record<string, unknown>;
  const request = { ...(base.request as Record<string, unknown> | undefined) };
  if (f.dialect) request.dialect = f.dialect;
  if (f.body) request.body = json(f, 'body');
  if (f['base-url']) request.base_url = f['base-url'];
  return {
    ...base,
    ...(f.name ? { name: f.name } : {}),
    ...(f.description ? { description: f.description } : {}),
    request,
    ...(f.assertions ? { assertions: json(f, 'assertions') } : {}),
    ...(f.tags !== undefined ? { tags: csv(f.tags) } : {}),
  } as never;
}

const CASE_FLAGS = ['project', 'json', 'name', 'description', 'dialect', 'body', 'base-url', 'assertions', 'tags'];
const PROJECT_FLAGS = ['account', 'gateway-key', 'key-format', 'max-concurrency', 'task-queue'];

const projectFields = (f: Flags) => ({
  accountId: f.account,
  gatewayKey: f['gateway-key'],
  keyFormat: f['key-format'] as KeyFormat | undefined,
  maxConcurrency: f['max-concurrency'],
  taskQueue: f['task-queue'],
});

const projectId = async (db: Db, f: Flags) => (await findProject(db, need(f, 'project'))).id;

export const TESTRUN_COMMANDS: Record<string, Command> = {
  'project create': {
    flags: ['name', ...PROJECT_FLAGS],
    run: (db, f) => createProject(db, { name: need(f, 'name'), ...projectFields(f) }, loadSealingKey()),
  },
  'project update': { flags: ['id', ...PROJECT_FLAGS], run: (db, f) => updateProject(db, need(f, 'id'), projectFields(f), loadSealingKey()) },
  'project show': { flags: ['id'], run: (db, f) => getProject(db, need(f, 'id')) },
  'project list': { flags: [], run: async (db) => ({ projects: await listProjects(db) }) },
  'case add': { flags: CASE_FLAGS, run: async (db, f) => addCase(db, await projectId(db, f), caseFromFlags(f)) },
  'case update': { flags: ['id', ...CASE_FLAGS], run: async (db, f) => replaceCase(db, await projectId(db, f), need(f, 'id'), caseFromFlags(f)) },
  'case list': { flags: ['project', 'tag'], run: async (db, f) => ({ cases: await listCases(db, await projectId(db, f), { tag: f.tag }) }) },
  'case remove': { flags: ['project', 'id'], run: async (db, f) => archiveCase(db, await projectId(db, f), need(f, 'id')) },
  'config set': {
    flags: ['project', 'name', 'json'],
    run: async (db, f) => setConfiguration(db, await projectId(db, f), { name: need(f, 'name'), settings: (json(f, 'json') ?? {}) as never }, { replace: true }),
  },
  'config list': { flags: ['project'], run: async (db, f) => ({ configurations: await listConfigurations(db, await projectId(db, f)) }) },
  'ci-token create': { flags: ['project', 'label'], run: (db, f) => createCiToken(db, need(f, 'project'), f.label) },
  'ci-token list': { flags: ['project'], run: async (db, f) => ({ tokens: await listCiTokens(db, need(f, 'project')) }) },
  'ci-token revoke': { flags: ['id'], run: (db, f) => revokeCiToken(db, need(f, 'id')) },
};
