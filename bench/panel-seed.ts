import { randomUUID } from 'node:crypto';
import type { Db } from '../platform/db';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { hashPassword } from '../services/panel/logins/passwords';

// The panel benchmark's tree (bench/panel.ts), seeded fast with bulk SQL: one INSERT … SELECT
// FROM unnest(…) for the orgs and their admin logins, one INSERT … SELECT FROM generate_series
// for the extra read_only logins. Paths are `<root>/<child>/…/<self>/` exactly as
// services/panel/orgs/orgs.ts builds them. Every seeded login shares ONE argon2id hash (of
// SEED_PASSWORD, computed once), so the seeding does not spend minutes hashing; each sign-in
// still verifies a real argon2id hash with the library's default parameters.
//
// Shape with the defaults (10,000 orgs, 100,000 logins):
//   platform (1) ─ providers (20)
//     each provider ─ 15 resellers ─ 4 sub-resellers (below resellers 1-4; sub-reseller 5 below
//     sub-reseller 1, a third reseller level) = 20 resellers per provider, 400 in all
//     customers (the rest, 9,579): round-robin over the providers; within a provider one in five
//     directly below it, the others round-robin over its 20 resellers
//   logins: one admin login per org (the platform's is `admin`, from ensurePlatform), the rest
//   read_only logins of customers, round-robin (≈ 9.4 per customer)

export const SEED_PASSWORD = 'bench password 2026 panel';

/** 47 (a prime, so every word occurs below every provider) words for the customers' names. */
export const NAME_WORDS = [
  'acme', 'alpine', 'amber', 'anchor', 'apex', 'aurora', 'bakery', 'beacon', 'birch', 'bistro', 'bloom', 'canyon',
  'cedar', 'cobalt', 'comet', 'coral', 'delta', 'dune', 'ember', 'falcon', 'fern', 'fjord', 'garnet', 'glacier',
  'harbor', 'hazel', 'indigo', 'island', 'jasper', 'juniper', 'kestrel', 'lagoon', 'lantern', 'maple', 'meadow', 'nectar',
  'nimbus', 'onyx', 'orchid', 'pebble', 'quartz', 'raven', 'sierra', 'summit', 'tundra', 'violet', 'willow',
];

export interface SeedOptions {
  orgs: number;
  logins: number;
  providers: number;
  /** top-level resellers per provider */
  resellersPerProvider: number;
}

export const SEED_DEFAULTS: SeedOptions = { orgs: 10_000, logins: 100_000, providers: 20, resellersPerProvider: 15 };

/**
 * The parents of a provider's sub-resellers, as indexes among its resellers (top ones first): the
 * first four top resellers, and the first sub-reseller (index `top`), a third reseller level.
 */
const subResellerParents = (top: number) => [0, 1, 2, 3, top];

export interface SeededOrg {
  id: string;
  path: string;
  name: string;
  type: 'platform' | 'provider' | 'reseller' | 'customer';
  /** the username of its admin login (password SEED_PASSWORD), or `admin` for the platform */
  username: string;
}

export interface Seeded {
  platform: SeededOrg;
  /** the admin's temporary password from ensurePlatform (to be changed at first sign-in) */
  adminTemporaryPassword: string;
  providers: SeededOrg[];
  /** all resellers, in the order they were generated (per provider: 15 top ones, then 5 sub-resellers) */
  resellers: SeededOrg[];
  /** a few customers (the first of each provider) */
  customers: SeededOrg[];
  /** usernames of read_only logins (password SEED_PASSWORD) */
  readOnlyUsernames: (n: number) => string[];
  counts: { orgs: number; logins: number; byType: Record<string, number>; maxDepth: number };
  ms: { hash: number; orgs: number; logins: number; analyze: number; total: number };
}

/** A PostgreSQL array literal of strings (every element quoted), bound as one parameter. */
function pgArray(values: Array<string | number>): string {
  return `{${values.map((v) => `"${String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`;
}

/**
 * Seeds the tree on an empty panel database. The platform and its `admin` come from
 * ensurePlatform (temporary password, as on a fresh install); everything else is bulk SQL.
 */
export async function seedPanel(db: Db, o: SeedOptions = SEED_DEFAULTS): Promise<Seeded> {
  const t0 = performance.now();
  const subParents = subResellerParents(o.resellersPerProvider);
  const subsPerProvider = subParents.length;
  const resellerCount = o.providers * (o.resellersPerProvider + subsPerProvider);
  const customerCount = o.orgs - 1 - o.providers - resellerCount;
  if (customerCount < o.providers) throw new Error(`${o.orgs} orgs are too few for ${o.providers} providers and ${resellerCount} resellers`);
  if (o.logins < o.orgs) throw new Error('at least one login per org');
  if (o.resellersPerProvider < 4) throw new Error('at least 4 top resellers per provider');

  const initial = await ensurePlatform(db, 'Platform');
  if (!initial) throw new Error('the panel database already has a platform: the benchmark needs an empty database');
  const root = await db('panel_orgs').where({ type: 'platform' }).first('id', 'path', 'name');

  const th = performance.now();
  const hash = await hashPassword(SEED_PASSWORD);
  const hashMs = performance.now() - th;

  // The orgs, parents before children; one row per array index.
  const rows = {
    id: [] as string[],
    parent: [] as string[],
    path: [] as string[],
    depth: [] as number[],
    type: [] as string[],
    name: [] as string[],
    power: [] as string[],
    username: [] as string[],
    role: [] as string[],
  };
  const add = (parent: { id: string; path: string; depth: number }, type: SeededOrg['type'], name: string, username: string, power = '') => {
    const id = randomUUID();
    const org = { id, path: `${parent.path}${id}/`, depth: parent.depth + 1, name, type, username };
    rows.id.push(id);
    rows.parent.push(parent.id);
    rows.path.push(org.path);
    rows.depth.push(org.depth);
    rows.type.push(type);
    rows.name.push(name);
    rows.power.push(power);
    rows.username.push(username);
    rows.role.push({ provider: 'provider_admin', reseller: 'reseller', customer: 'account_owner', platform: 'platform_admin' }[type]);
    return org;
  };
  const platform = { id: root.id as string, path: root.path as string, depth: 0 };
  const pad = (n: number, w: number) => String(n).padStart(w, '0');
  const providers: Array<ReturnType<typeof add>> = [];
  const resellersOf: Array<Array<ReturnType<typeof add>>> = [];
  let resellerNo = 0;
  for (let p = 0; p < o.providers; p++) {
    const provider = add(platform, 'provider', `Provider ${pad(p + 1, 2)}`, `prov${p + 1}`);
    providers.push(provider);
    const mine: Array<ReturnType<typeof add>> = [];
    for (let r = 0; r < o.resellersPerProvider; r++) {
      // the resellers that get sub-resellers hold the power to create them, as the API requires
      const power = subParents.includes(r) ? 'create_subresellers' : '';
      mine.push(add(provider, 'reseller', `Reseller ${pad(p + 1, 2)}-${pad(r + 1, 2)}`, `resl${++resellerNo}`, power));
    }
    subParents.forEach((parentIndex, s) => {
      const parent = mine[parentIndex];
      const power = subParents.includes(mine.length) ? 'create_subresellers' : '';
      mine.push(add(parent, 'reseller', `Sub-reseller ${pad(p + 1, 2)}-${pad(s + 1, 2)}`, `resl${++resellerNo}`, power));
    });
    resellersOf.push(mine);
  }
  const customers: Array<ReturnType<typeof add>> = [];
  for (let i = 0; i < customerCount; i++) {
    const p = i % o.providers;
    const j = Math.floor(i / o.providers);
    const parent = j % 5 === 0 ? providers[p] : resellersOf[p][j % resellersOf[p].length];
    const c = add(parent, 'customer', `Customer ${pad(i + 1, 5)} ${NAME_WORDS[i % NAME_WORDS.length]}`, `cust${i + 1}`);
    if (i < o.providers) customers.push(c);
  }

  const to = performance.now();
  await db.transaction(async (trx) => {
    await trx.raw(
      `INSERT INTO panel_orgs (id, parent_id, path, depth, type, name, powers)
       SELECT u.id, u.parent_id, u.path, u.depth, u.type, u.name, CASE WHEN u.power = '' THEN '{}'::text[] ELSE ARRAY[u.power] END
       FROM unnest(?::uuid[], ?::uuid[], ?::text[], ?::int[], ?::text[], ?::text[], ?::text[]) AS u(id, parent_id, path, depth, type, name, power)`,
      [pgArray(rows.id), pgArray(rows.parent), pgArray(rows.path), pgArray(rows.depth), pgArray(rows.type), pgArray(rows.name), pgArray(rows.power)],
    );
  });
  const orgsMs = performance.now() - to;

  const tl = performance.now();
  const readOnly = o.logins - o.orgs;
  await db.transaction(async (trx) => {
    // The admin login of every seeded org.
    await trx.raw(
      `INSERT INTO panel_logins (id, org_id, username, password_hash, role, must_change_password)
       SELECT gen_random_uuid(), u.org_id, u.username, ?, u.role, false
       FROM unnest(?::uuid[], ?::text[], ?::text[]) AS u(org_id, username, role)`,
      [hash, pgArray(rows.id), pgArray(rows.username), pgArray(rows.role)],
    );
    // read_only logins of the customers, round-robin in tree order: ro0, ro1, …
    if (readOnly > 0) {
      await trx.raw(
        `INSERT INTO panel_logins (id, org_id, username, password_hash, role, must_change_password)
         SELECT gen_random_uuid(), c.id, 'ro' || g, ?, 'read_only', false
         FROM generate_series(0, ? - 1) AS g
         JOIN (SELECT id, row_number() OVER (ORDER BY path) - 1 AS k FROM panel_orgs WHERE type = 'customer') AS c ON c.k = g % ?`,
        [hash, readOnly, customerCount],
      );
    }
  });
  const loginsMs = performance.now() - tl;

  // Statistics and the visibility map as a settled database would have them (autovacuum would
  // get there on its own a little later).
  const ta = performance.now();
  await db.raw('VACUUM ANALYZE panel_orgs');
  await db.raw('VACUUM ANALYZE panel_logins');
  const analyzeMs = performance.now() - ta;

  const byTypeRows: Array<{ type: string; n: number }> = await db('panel_orgs').groupBy('type').select('type', db.raw('count(*)::int AS n'));
  const total = await db('panel_orgs').first(db.raw('count(*)::int AS n'), db.raw('max(depth)::int AS d'));
  const logins = await db('panel_logins').first(db.raw('count(*)::int AS n'));
  if (total.n !== o.orgs || logins.n !== o.logins) throw new Error(`seeded ${total.n} orgs and ${logins.n} logins, expected ${o.orgs} and ${o.logins}`);

  const view = (x: ReturnType<typeof add>): SeededOrg => ({ id: x.id, path: x.path, name: x.name, type: x.type, username: x.username });
  return {
    platform: { id: platform.id, path: platform.path, name: root.name, type: 'platform', username: initial.username },
    adminTemporaryPassword: initial.password,
    providers: providers.map(view),
    resellers: resellersOf.flat().map(view),
    customers: customers.map(view),
    readOnlyUsernames: (n: number) => Array.from({ length: Math.min(n, readOnly) }, (_, i) => `ro${i}`),
    counts: { orgs: total.n, logins: logins.n, byType: Object.fromEntries(byTypeRows.map((r) => [r.type, r.n])), maxDepth: total.d },
    ms: { hash: hashMs, orgs: orgsMs, logins: loginsMs, analyze: analyzeMs, total: performance.now() - t0 },
  };
}
