import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { Client } from '@temporalio/client';
import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { parseCronLine } from '../../../domain/panel/cron';
import { phpValuesProblem, PHP_VALUES, type PhpValueName, type PhpValues } from '../../../domain/panel/php-values';
import { siteLimits, siteLimitsView } from '../../../domain/panel/limits';
import type { SftpKey } from '../../../domain/panel/sftp';
import { HOSTING_NODE, isDomain, isNodeName, isPhpIdentifier, type EnforcedLimits, type NodeOperation, type SiteLimits, type SiteSpec } from '../../../domain/panel/node-ops';
import { basicRefusals, nodeRoles, refusalForCustomer, schedule, type NodeCandidate, type NodeVerdict, type PreflightFacts } from '../../../domain/panel/placement';
import { isBelow, rolePowers, type RolePower } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { checkCounted, effectiveLimits, effectiveRegions, findInScope, isUuid, loadChain, ownLimits, type ChainLevel } from '../shared/chain';
import { NODE_OP_DEFAULTS, startNodeOp, type NodeOpSettings } from './client';
import { queueOperation } from '../nodes/queue';
import { finishSiteOp } from './outcomes';
import { allocatedQuotaMb, checkMeasuredUse } from './quotas';

// Websites of customer accounts (spec 2 sections 2.6, 3, 4.2 "Add website", 4.4.1-4.4.2): create
// (checked and recorded in one transaction that locks the account's path root first, so counted
// limits and disk quotas never overshoot), placement, suspend, PHP settings, delete. Every change
// bumps the site's generation and queues one node operation in the same transaction; after the
// commit its workflow (`node-op-<op_id>`) applies it and records the outcome (./outcomes.ts).
// Lock order: org rows along the path root first, then the site row, then its node operation.

type Q = Knex | Knex.Transaction;

export interface SiteRow {
  id: string;
  org_id: string;
  domain: string;
  aliases: string[];
  php_version: string | null;
  cron: string[];
  node_name: string;
  status: 'pending' | 'active' | 'suspended' | 'failed';
  suspended: boolean;
  /** suspended because an org above it is (./org-suspension.ts); apart from its own `suspended` */
  org_suspended: boolean;
  deleting: boolean;
  quota_mb: number;
  php_workers: number | null;
  /** the account's effective limits its node binds in the site's control group (./site-limits.ts) */
  limits: SiteLimits;
  allow_url_fopen: boolean;
  disabled_functions: string[];
  /** the owner's PHP values within the operator's bounds (domain/panel/php-values.ts) */
  php_values: PhpValues;
  generation: number;
  applied_generation: number;
  placement: PlacementRecord;
  error: string | null;
  last_op_id: string | null;
  /** the attached certificate chain (PEM) and its sealed private key; null: HTTP only (./certificates.ts) */
  tls_certificate: string | null;
  tls_key_sealed: string | null;
  tls_attached_at: Date | null;
  /** the keys that may log in over SFTP (./sftp.ts) */
  sftp_keys: SftpKey[];
  created_at: Date;
  updated_at: Date;
}

/** Why a site is on its node, recorded when it was created. */
export interface PlacementRecord {
  mode: 'hosting' | 'named' | 'scheduled';
  node: string;
  reason: string;
  decided_at: string;
  decided_by: string;
  /** scheduled placement: every node's verdict at that moment */
  nodes?: NodeVerdict[];
}

export interface PlacementSettings {
  /** `-placement scheduled`: sites added without a node are placed by the scheduler */
  mode: 'scheduled' | null;
  /** `-placement-node-facts`: the preflight facts file, read at every scheduled placement */
  factsFile: string | null;
  /** `-node-api-listen` is set, so agents can pull */
  nodeApiEnabled: boolean;
}

export interface SitesDeps {
  db: Db;
  temporal: Client;
  nodeOps: NodeOpSettings;
  placement: PlacementSettings;
  logger: Logger;
}

/** What `panel-api serve` configures of sites: the node operations' queue and wait, and placement (its flags). */
export interface SiteSettings {
  nodeOps?: Partial<NodeOpSettings>;
  placement?: Partial<PlacementSettings>;
}

export const sitesDeps = (base: { db: Db; temporal: Client; logger: Logger }, s: SiteSettings = {}): SitesDeps => ({
  db: base.db,
  temporal: base.temporal,
  logger: base.logger,
  nodeOps: { ...NODE_OP_DEFAULTS, ...s.nodeOps },
  placement: { mode: null, factsFile: null, nodeApiEnabled: false, ...s.placement },
});

export const DEFAULT_QUOTA_MB = 1024;
export const MAX_DISABLED_FUNCTIONS = 64;
const MAX_ALIASES = 100;
const MAX_CRON_LINES = 100;
const PHP_VERSION = /^\d{1,2}\.\d{1,2}$/;

export function siteView(s: SiteRow) {
  return {
    id: s.id,
    org_id: s.org_id,
    domain: s.domain,
    aliases: s.aliases,
    php_version: s.php_version,
    cron: s.cron,
    node: s.node_name,
    status: s.status,
    suspended: s.suspended,
    org_suspended: s.org_suspended,
    deleting: s.deleting,
    quota_mb: s.quota_mb,
    php: { workers: s.php_workers, allow_url_fopen: s.allow_url_fopen, disabled_functions: s.disabled_functions },
    php_values: s.php_values,
    generation: s.generation,
    applied_generation: s.applied_generation,
    error: s.error,
    operation_id: s.last_op_id,
    created_at: s.created_at,
    updated_at: s.updated_at,
  };
}

/** The site as its node renders it. */
export const specOf = (s: SiteRow): SiteSpec => ({
  id: s.id,
  domain: s.domain,
  aliases: s.aliases,
  phpVersion: s.php_version,
  cron: s.cron,
  suspended: s.suspended || s.org_suspended,
  php: { workers: s.php_workers, allowUrlFopen: s.allow_url_fopen, disabledFunctions: s.disabled_functions, ...(Object.keys(s.php_values ?? {}).length ? { values: s.php_values } : {}) },
  generation: s.generation,
  ...(s.tls_certificate ? { tls: { certificate: s.tls_certificate } } : {}),
  limits: s.limits,
  // SFTP keys (./sftp.ts): only when there are some, so sites without keys keep the spec they had
  ...(s.sftp_keys?.length ? { sftpKeys: s.sftp_keys.map((k) => k.public_key) } : {}),
});

// ---- input ----------------------------------------------------------------------------------

export interface CreateSiteInput {
  domain: string;
  aliases?: string[];
  php_version?: string | null;
  cron?: string[];
  /** per-site PHP values within the operator's bounds (domain/panel/php-values.ts) */
  php_values?: PhpValues;
  quota_mb?: number;
  node?: string;
}

function checkDomainName(raw: unknown, field: string): string {
  if (typeof raw !== 'string') throw invalid(field, 'must be a string');
  const d = raw.trim().toLowerCase();
  if (!isDomain(d)) throw invalid(field, `"${raw}" is not a fully qualified domain name (lower-case labels, at least two, no wildcard)`);
  return d;
}

function checkSiteInput(input: CreateSiteInput) {
  const domain = checkDomainName(input.domain, 'domain');
  const aliases = (input.aliases ?? []).map((a, i) => checkDomainName(a, `aliases.${i}`));
  if (aliases.length > MAX_ALIASES) throw invalid('aliases', `at most ${MAX_ALIASES}`);
  const seen = new Set([domain]);
  aliases.forEach((a, i) => {
    if (seen.has(a)) throw invalid(`aliases.${i}`, `"${a}" is given twice`);
    seen.add(a);
  });
  const php = input.php_version ?? null;
  if (php !== null && !PHP_VERSION.test(php)) throw invalid('php_version', 'a PHP version such as "8.2", or null for a static site');
  const cron = input.cron ?? [];
  if (cron.length > MAX_CRON_LINES) throw invalid('cron', `at most ${MAX_CRON_LINES} lines`);
  cron.forEach((l, i) => {
    const parsed = parseCronLine(l);
    if (typeof parsed === 'string') throw invalid(`cron.${i}`, parsed);
  });
  const quota = input.quota_mb ?? DEFAULT_QUOTA_MB;
  if (!Number.isInteger(quota) || quota < 1 || quota > 100_000_000) throw invalid('quota_mb', 'a whole number of MB from 1');
  if (input.node !== undefined && !isNodeName(input.node)) throw invalid('node', 'a node name');
  const given = input.php_values ?? {};
  const valuesProblem = phpValuesProblem(given);
  if (valuesProblem) throw invalid(...valuesProblem);
  const phpValues = Object.fromEntries((Object.keys(PHP_VALUES) as PhpValueName[]).filter((k) => given[k] !== undefined).map((k) => [k, given[k]]));
  return { domain, aliases, php, cron, phpValues, quota, node: input.node };
}

/** `"exec, shell_exec"` → ['exec', 'shell_exec']: at most 64 PHP function names. */
export function parseDisabledFunctions(raw: string): string[] {
  const names = [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))];
  if (names.length > MAX_DISABLED_FUNCTIONS) throw invalid('disabled_functions', `at most ${MAX_DISABLED_FUNCTIONS} functions (${names.length} given)`);
  const bad = names.find((n) => !isPhpIdentifier(n));
  if (bad !== undefined) throw invalid('disabled_functions', `"${bad.slice(0, 80)}" is not a PHP function name`);
  return names;
}

// ---- scope ----------------------------------------------------------------------------------

const hasPower = (actor: Actor, power: RolePower) => rolePowers(actor.role, actor.orgType).includes(power);

function requireRolePower(actor: Actor, power: RolePower): void {
  if (!hasPower(actor, power)) throw new PanelError('power_missing', { power, holder: `login "${actor.username}" (${actor.role})` });
}

const inScope = (actor: Actor, org: { id: string; path: string }) => org.id === actor.orgId || isBelow(org.path, actor.orgPath);

/** The site `id` and its org's path if it lies in the actor's subtree (`lock`: its row FOR UPDATE); else 404. */
export async function siteInScope(q: Q, actor: Actor, id: string, lock = false): Promise<SiteRow & { org_path: string }> {
  if (!isUuid(id)) throw notFound('site');
  const query = q('panel_sites as s').join('panel_orgs as o', 'o.id', 's.org_id').where('s.id', id).first('s.*', 'o.path as org_path');
  if (lock) query.forUpdate('s');
  const site = await query;
  if (!site || !inScope(actor, { id: site.org_id, path: site.org_path })) throw notFound('site');
  return site;
}

// ---- limits ---------------------------------------------------------------------------------

/**
 * Disk (soft, spec 2.3 rule 3): the site quotas allocated below each level of the locked chain
 * plus `quota` must stay within that level's disk_mb; refused at the limit with limit_reached.
 */
async function checkDiskQuota(trx: Knex.Transaction, chain: ChainLevel[], quota: number): Promise<void> {
  for (const level of chain) {
    const limit = ownLimits(level).disk_mb;
    if (limit === undefined || limit === null) continue;
    const used = await allocatedQuotaMb(trx, level.path);
    if (used + quota > limit) {
      throw new PanelError('limit_reached', {
        limit: 'disk_mb',
        level: `${level.type} "${level.name}"`,
        value: limit,
        org_id: level.id,
        used,
        field: 'quota_mb',
        detail: `${used} MB of website quotas are allocated below it, so a quota of ${quota} MB does not fit`,
      });
    }
  }
}

// ---- placement ------------------------------------------------------------------------------

export interface NodeRow {
  name: string;
  kind: 'hosting' | 'agent';
  state: 'alive' | 'suspect' | 'dead';
  draining: boolean;
  roles: string[] | null;
  facts: { roles?: string[]; phpVersions?: string[]; limits?: EnforcedLimits } | null;
  logical_region: string | null;
  last_pull_at: Date | null;
  metrics: { cpuPercent?: number } | null;
}

export const candidateOf = (n: NodeRow, sites: number): NodeCandidate => ({
  name: n.name,
  state: n.state,
  draining: n.draining,
  roles: nodeRoles(n.roles, n.facts),
  logicalRegion: n.logical_region,
  lastPullAt: n.last_pull_at,
  sites,
  cpuPercent: typeof n.metrics?.cpuPercent === 'number' ? n.metrics.cpuPercent : null,
});

/**
 * The preflight facts placement weighs: the node facts file where one is given (`-placement-node-facts`),
 * else what each node reports of itself (a node that reports stands in for its preflight; its PHP versions).
 */
export function placementFacts(file: string | null, nodes: NodeRow[], logger: Logger): PreflightFacts[] {
  if (file) return readFactsFile(file, logger);
  return nodes.map((n) => ({ node: n.name, preflight_passed: true, checked_at: ((n as { facts_at?: Date | null }).facts_at ?? new Date(0)).toISOString(), php_versions: (n.facts as { phpVersions?: string[] } | null)?.phpVersions ?? [] }));
}

function readFactsFile(file: string | null, logger: Logger): PreflightFacts[] {
  if (!file) return [];
  try {
    const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as { nodes?: unknown };
    return Array.isArray(parsed.nodes) ? (parsed.nodes as PreflightFacts[]).filter((n) => n && typeof n.node === 'string' && Array.isArray(n.php_versions)) : [];
  } catch (err) {
    logger.warn({ err, file }, 'the node facts file cannot be read: no node passes the placement preflight');
    return [];
  }
}

/** A PHP version the node's reported facts do not list is refused with 400 naming those it offers (facts not reported yet: not checked). */
function checkPhpOn(node: NodeRow, php: string | null): void {
  const offered = node.facts?.phpVersions;
  if (php === null || !Array.isArray(offered) || offered.includes(php)) return;
  throw invalid('php_version', `PHP ${php} is not available on node "${node.name}"; it offers ${offered.length ? offered.join(', ') : 'no PHP (static sites only)'}`);
}

async function place(trx: Knex.Transaction, deps: SitesDeps, actor: Actor, chain: ChainLevel[], site: { node?: string; php: string | null }): Promise<PlacementRecord> {
  const decided = { decided_at: new Date().toISOString(), decided_by: actor.username };
  if (site.node !== undefined) {
    requireRolePower(actor, 'site.place');
    const node: NodeRow | undefined = await trx('panel_nodes').where({ name: site.node }).first();
    if (!node) throw invalid('node', `no node named "${site.node}"`);
    const why = basicRefusals(candidateOf(node, 0));
    if (why.length) throw new PanelError('conflict', { node: node.name, reasons: why, detail: `node "${node.name}" cannot take new sites: ${why.map((r) => r.message).join('; ')}` });
    checkPhpOn(node, site.php);
    return { mode: 'named', node: node.name, reason: `node "${node.name}" was named by ${actor.username} (site.place)`, ...decided };
  }
  if (deps.placement.mode !== 'scheduled') {
    const hosting: NodeRow | undefined = await trx('panel_nodes').where({ name: HOSTING_NODE }).first();
    if (!hosting) throw new PanelError('conflict', { node: HOSTING_NODE, detail: 'the panel has no hosting node set up, so no site can be created' });
    if (hosting.draining) throw new PanelError('conflict', { node: HOSTING_NODE, detail: 'the hosting node is draining: it gets no new sites' });
    checkPhpOn(hosting, site.php);
    return { mode: 'hosting', node: HOSTING_NODE, reason: "the panel's own hosting node (placement is not scheduled)", ...decided };
  }
  const [nodes, counts] = await Promise.all([
    trx('panel_nodes').select<NodeRow[]>('*'),
    trx('panel_sites').groupBy('node_name').select('node_name', trx.raw('count(*)::int AS n')) as Promise<Array<{ node_name: string; n: number }>>,
  ]);
  const sitesOn = new Map(counts.map((c) => [c.node_name, c.n]));
  const { required_region } = effectiveRegions(chain);
  const p = schedule(
    nodes.map((n) => candidateOf(n, sitesOn.get(n.name) ?? 0)),
    placementFacts(deps.placement.factsFile, nodes, deps.logger),
    { phpVersion: site.php, requiredRegion: required_region, nodeApiEnabled: deps.placement.nodeApiEnabled, now: new Date() },
  );
  if (!p.node) {
    if (actor.orgType === 'platform') {
      throw new PanelError('conflict', {
        detail: `no node can take the site: ${p.nodes.map((n) => `${n.node}: ${n.reasons.map((r) => r.message).join('; ')}`).join(' | ') || 'there are no nodes'}`,
        nodes: p.nodes.map((n) => ({ node: n.node, reasons: n.reasons })),
        ...(required_region ? { required_region } : {}),
      });
    }
    throw new PanelError('conflict', refusalForCustomer(p, required_region));
  }
  const chosen = p.nodes[0];
  const load = `${chosen.sites} site(s)${chosen.cpu_percent === null ? '' : `, CPU ${chosen.cpu_percent.toFixed(1)} %`}`;
  return { mode: 'scheduled', node: p.node, reason: `chosen by the scheduler: the least loaded qualifying node (${load})`, nodes: p.nodes, ...decided };
}

/** Starts the operation's workflow after the commit; if Temporal cannot take it, the site fails now rather than stay pending. */
export async function startOp(deps: SitesDeps, site: SiteRow, kind: NodeOperation['kind'] & ('site.apply' | 'site.delete')): Promise<SiteRow> {
  const opId = site.last_op_id!;
  try {
    await startNodeOp(deps.temporal, deps.nodeOps, { input: { opId, node: site.node_name, siteId: site.id, orgId: site.org_id, kind, generation: site.generation }, domain: site.domain });
    return site;
  } catch (err) {
    deps.logger.error({ err, site_id: site.id, op_id: opId }, 'the node operation could not be started');
    await finishSiteOp(deps.db, { siteId: site.id, opId, generation: site.generation, kind, result: { ok: false, refused: false, error: `the operation could not be started: ${(err as Error).message}` } });
    return (await deps.db('panel_sites').where({ id: site.id }).first()) ?? site;
  }
}

// ---- the API's functions --------------------------------------------------------------------

/** Creates a site under a customer account in the actor's subtree: 201 with status pending; the node operation follows. */
export async function createSite(deps: SitesDeps, actor: Actor, orgId: string, input: CreateSiteInput) {
  const { row: site } = await deps.db.transaction((trx) => insertSite(trx, deps, actor, orgId, input));
  return siteView(await startOp(deps, site, 'site.apply'));
}

/** How a site made from something else (a restore point) is placed and built, instead of placement and a plain site.apply. */
export interface SiteOrigin {
  placement: PlacementRecord;
  /** the node operation that builds the site (its id is the row's last_op_id) */
  operation(row: SiteRow): NodeOperation;
  /** operator PHP settings the new site starts with (default: none) */
  php?: OperatorPhp;
  action: string;
}

/**
 * Checks and records a new site in `trx` (every quota and the domain-unused rule, under the lock of
 * the account's path) and queues the operation that builds it; the caller starts its workflow
 * after the commit. Returns the row and the locked chain.
 */
export async function insertSite(trx: Knex.Transaction, deps: SitesDeps, actor: Actor, orgId: string, input: CreateSiteInput, origin?: SiteOrigin): Promise<{ row: SiteRow; chain: ChainLevel[] }> {
  const s = checkSiteInput(input);
  const domains = [s.domain, ...s.aliases];
  const org = await findInScope(trx, actor, orgId);
  if (org.type !== 'customer') throw new PanelError('conflict', { detail: `websites belong to customer accounts only; ${org.type} "${org.name}" is not one` });
  const chain = await loadChain(trx, org.path, true);
  if (chain[chain.length - 1]?.id !== org.id) throw notFound('organisation');
  const suspendedLevel = chain.find((l) => l.status === 'suspended');
  if (suspendedLevel) throw new PanelError('conflict', { detail: `${suspendedLevel.type} "${suspendedLevel.name}" is suspended: nothing new is created below it` });
  const taken = await trx('panel_domains').whereIn('domain', domains).first('domain');
  if (taken) throw domainTaken(taken.domain);
  await checkCounted(trx, chain, 'websites', 1);
  await checkCounted(trx, chain, 'domains', domains.length);
  await checkDiskQuota(trx, chain, s.quota);
  // soft quotas (spec 2.3 rule 3) on what the nodes measure, too: no new website at the disk or inode limit
  await checkMeasuredUse(trx, chain, 'at-limit', 'no new website is created below it');
  const placement = origin?.placement ?? (await place(trx, deps, actor, chain, { node: s.node, php: s.php }));

  const id = randomUUID();
  const opId = randomUUID();
  let row: SiteRow;
  try {
    [row] = await trx('panel_sites')
      .insert({
        id,
        org_id: org.id,
        domain: s.domain,
        aliases: s.aliases,
        php_version: s.php,
        cron: s.cron,
        php_values: JSON.stringify(s.phpValues),
        node_name: placement.node,
        quota_mb: s.quota,
        php_workers: effectiveLimits(chain).php_workers.value,
        limits: JSON.stringify(siteLimits(effectiveLimits(chain))),
        ...origin?.php,
        placement: JSON.stringify(placement),
        last_op_id: opId,
      })
      .returning('*');
    await trx('panel_domains').insert(domains.map((domain) => ({ domain, site_id: id })));
  } catch (err) {
    const clash = domainOfUniqueViolation(err);
    if (clash) throw domainTaken(clash);
    throw err;
  }
  await queueOperation(trx, row.node_name, origin?.operation(row) ?? { id: opId, kind: 'site.apply', site: specOf(row) });
  await audit(trx, actor, { org, action: origin?.action ?? 'site.create', target: { type: 'site', id }, after: { ...siteView(row), placement: { mode: placement.mode, node: placement.node } } });
  return { row, chain };
}

const domainTaken = (domain: string, field = 'domain') => new PanelError('conflict', { domain, field, detail: `the domain "${domain}" is already used by a website on this platform` });

/** The domain named by a unique violation of panel_domains or panel_sites.domain (a concurrent create won). */
function domainOfUniqueViolation(err: unknown): string | null {
  const e = err as { code?: string; constraint?: string; detail?: string };
  if (e?.code !== '23505' || !['panel_domains_pkey', 'panel_sites_domain_unique'].includes(e.constraint ?? '')) return null;
  return /=\((.*)\)/.exec(e.detail ?? '')?.[1] ?? 'given';
}

/** The site, with the PHP versions its node offers (null until the node reported its facts): what an edit may choose. */
export async function getSite(db: Db, actor: Actor, id: string) {
  const site = await siteInScope(db, actor, id);
  const node: Pick<NodeRow, 'facts'> | undefined = await db('panel_nodes').where({ name: site.node_name }).first('facts');
  return { ...siteView(site), node_php_versions: phpVersionsOf(node?.facts), limits: siteLimitsView(site.limits, site.php_workers, node?.facts?.limits) };
}

const phpVersionsOf = (facts: NodeRow['facts'] | undefined) => (Array.isArray(facts?.phpVersions) ? [...facts.phpVersions].sort() : null);

/**
 * The PHP versions a new site may get: those of the hosting node, or with scheduled placement those
 * of any alive, undrained node with the web role; null when no such node has reported its facts.
 */
export async function offeredPhpVersions(db: Db, mode: PlacementSettings['mode']): Promise<string[] | null> {
  const nodes: NodeRow[] = mode === 'scheduled' ? await db('panel_nodes').where({ state: 'alive', draining: false }) : await db('panel_nodes').where({ name: HOSTING_NODE });
  const offered = nodes.filter((n) => mode !== 'scheduled' || nodeRoles(n.roles, n.facts).includes('web')).map((n) => phpVersionsOf(n.facts));
  if (offered.every((v) => v === null)) return null;
  return [...new Set(offered.flatMap((v) => v ?? []))].sort();
}

/** Why the site is on its node; the other nodes' verdicts only for the platform's own logins. */
export async function getPlacement(db: Db, actor: Actor, id: string) {
  const site = await siteInScope(db, actor, id);
  const { nodes, ...rest } = site.placement;
  return { site_id: site.id, ...rest, ...(nodes && actor.orgType === 'platform' ? { nodes } : {}) };
}

export interface ListSitesQuery {
  /** the sites of every account below the org too */
  subtree?: boolean;
  status?: SiteRow['status'];
  /** only sites stopped by their own suspension or an org's */
  suspended?: boolean;
  limit: number;
  /** the last domain of the previous page */
  after?: string;
}

/** The sites of an org (or of its whole subtree), by domain, a page at a time. */
export async function listSites(db: Db, actor: Actor, orgId: string, query: ListSitesQuery) {
  const org = await findInScope(db, actor, orgId);
  const q = db('panel_sites as s').orderBy('s.domain').limit(query.limit).select('s.*');
  if (query.subtree) q.join('panel_orgs as o', 'o.id', 's.org_id').where('o.path', 'like', `${org.path}%`);
  else q.where('s.org_id', org.id);
  if (query.status) q.where('s.status', query.status);
  if (query.suspended) q.where((w) => w.where('s.suspended', true).orWhere('s.org_suspended', true));
  if (query.after) q.where('s.domain', '>', query.after);
  const rows: SiteRow[] = await q;
  return { sites: rows.map(siteView), next: rows.length === query.limit ? rows[rows.length - 1].domain : null };
}

/**
 * A change to an existing site: the next generation, status pending, one node operation, audited.
 * `specFor` adds to the operation's spec what the row does not hold in clear (a certificate's key).
 */
export async function changeSite(
  deps: SitesDeps,
  actor: Actor,
  id: string,
  decide: (site: SiteRow, trx: Knex.Transaction, chain: ChainLevel[] | null) => SiteChange | null | Promise<SiteChange | null>,
  specFor: (row: SiteRow) => SiteSpec = specOf,
  /** lock the account's path first (the lock order) and hand its chain to `decide`, for counted limits */
  lockPath = false,
) {
  const out = await deps.db.transaction(async (trx) => {
    const chain = lockPath ? await loadChain(trx, (await siteInScope(trx, actor, id)).org_path, true) : null;
    const site = await siteInScope(trx, actor, id, true);
    if (site.deleting) throw new PanelError('conflict', { detail: `the website ${site.domain} is being deleted` });
    const change = await decide(site, trx, chain);
    if (!change) return { site, started: false };
    const opId = randomUUID();
    const [row]: SiteRow[] = await trx('panel_sites')
      .where({ id: site.id })
      .update({ ...change.changes, generation: site.generation + 1, status: 'pending', last_op_id: opId, updated_at: trx.fn.now() })
      .returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'site.apply', site: specFor(row) });
    await audit(trx, actor, { org: { id: site.org_id, path: site.org_path }, action: change.action, target: { type: 'site', id: site.id }, before: change.before, after: change.after });
    return { site: row, started: true };
  });
  return siteView(out.started ? await startOp(deps, out.site, 'site.apply') : out.site);
}

type SiteChange = { action: string; changes: Partial<SiteRow>; before: unknown; after: unknown };

export interface EditSiteInput {
  aliases?: string[];
  php_version?: string | null;
  cron?: string[];
  /** values to set; null returns one to PHP's default */
  php_values?: Partial<Record<PhpValueName, number | null>>;
}

/**
 * Edits a site after creation (PATCH /v1/sites/{id}): aliases, PHP version, cron lines, with the
 * checks of creation (field-named 400s, domains unique platform-wide, the domains limit along the
 * locked path, the PHP version present on the site's node), as one node operation.
 */
export function editSite(deps: SitesDeps, actor: Actor, id: string, input: EditSiteInput) {
  if (input.aliases === undefined && input.php_version === undefined && input.cron === undefined && input.php_values === undefined) throw invalid('body', 'give aliases, php_version, cron and/or php_values');
  const setValues = Object.fromEntries(Object.entries(input.php_values ?? {}).filter(([, v]) => v !== null));
  const valuesProblem = phpValuesProblem(setValues);
  if (valuesProblem) throw invalid(...valuesProblem);
  return changeSite(
    deps,
    actor,
    id,
    async (site, trx, chain) => {
      const s = checkSiteInput({ domain: site.domain, aliases: input.aliases ?? site.aliases, php_version: input.php_version === undefined ? site.php_version : input.php_version, cron: input.cron ?? site.cron });
      const changes: Partial<SiteRow> = {};
      if (input.aliases !== undefined && s.aliases.join() !== site.aliases.join()) changes.aliases = s.aliases;
      if (input.php_version !== undefined && s.php !== site.php_version) changes.php_version = s.php;
      if (input.cron !== undefined && s.cron.join('\n') !== site.cron.join('\n')) changes.cron = s.cron;
      if (input.php_values !== undefined) {
        const merged: PhpValues = { ...site.php_values, ...setValues };
        for (const [k, v] of Object.entries(input.php_values)) if (v === null) delete merged[k as PhpValueName];
        const ordered = Object.fromEntries((Object.keys(PHP_VALUES) as PhpValueName[]).filter((k) => merged[k] !== undefined).map((k) => [k, merged[k]]));
        if (JSON.stringify(ordered) !== JSON.stringify(site.php_values)) changes.php_values = ordered;
      }
      if (!Object.keys(changes).length) return null;
      if (changes.php_version) checkPhpOn(await trx('panel_nodes').where({ name: site.node_name }).first(), changes.php_version);
      if (changes.aliases) {
        const added = s.aliases.filter((a) => !site.aliases.includes(a));
        const taken = added.length ? await trx('panel_domains').whereIn('domain', added).first('domain') : undefined;
        if (taken) throw domainTaken(taken.domain, `aliases.${s.aliases.indexOf(taken.domain)}`);
        if (s.aliases.length > site.aliases.length) await checkCounted(trx, chain!, 'domains', s.aliases.length - site.aliases.length);
        await trx('panel_domains').where({ site_id: site.id }).whereIn('domain', site.aliases.filter((a) => !s.aliases.includes(a))).delete();
        try {
          if (added.length) await trx('panel_domains').insert(added.map((domain) => ({ domain, site_id: site.id })));
        } catch (err) {
          const clash = domainOfUniqueViolation(err);
          if (clash) throw domainTaken(clash, 'aliases');
          throw err;
        }
      }
      const before = Object.fromEntries(Object.keys(changes).map((k) => [k, site[k as keyof SiteRow]]));
      // jsonb: the row update takes it as JSON text
      return { action: 'site.edit', changes: changes.php_values ? { ...changes, php_values: JSON.stringify(changes.php_values) as unknown as PhpValues } : changes, before, after: changes };
    },
    specOf,
    true,
  );
}

/** Suspends or unsuspends a site (from the levels above its account): a new generation applied on its node. */
export function setSiteSuspended(deps: SitesDeps, actor: Actor, id: string, suspended: boolean) {
  return changeSite(deps, actor, id, (site) => {
    if (site.org_id === actor.orgId) throw new PanelError('forbidden', { detail: "suspending a website belongs to the levels above its account" });
    const settled = site.status === 'active' || site.status === 'suspended';
    if (site.suspended === suspended && settled) return null;
    return { action: suspended ? 'site.suspend' : 'site.unsuspend', changes: { suspended }, before: { suspended: site.suspended, status: site.status }, after: { suspended } };
  });
}

/** The operator PHP settings of a site (php.admin), as its row holds them. */
export type OperatorPhp = Pick<SiteRow, 'allow_url_fopen' | 'disabled_functions'>;
export const operatorPhp = (s: OperatorPhp): OperatorPhp => ({ allow_url_fopen: s.allow_url_fopen, disabled_functions: s.disabled_functions });

export interface PhpSettingsInput {
  allow_url_fopen?: boolean;
  /** comma-separated PHP function names, at most 64 */
  disabled_functions?: string;
}

/** Operator PHP settings of a site (php.admin: the platform's own logins); nothing inside the site overrides them. */
export function setPhpSettings(deps: SitesDeps, actor: Actor, id: string, input: PhpSettingsInput) {
  requireRolePower(actor, 'php.admin');
  if (input.allow_url_fopen === undefined && input.disabled_functions === undefined) throw invalid('body', 'give allow_url_fopen and/or disabled_functions');
  const disabled = input.disabled_functions === undefined ? undefined : parseDisabledFunctions(input.disabled_functions);
  return changeSite(deps, actor, id, (site) => {
    const changes: Partial<SiteRow> = {};
    if (input.allow_url_fopen !== undefined) changes.allow_url_fopen = input.allow_url_fopen;
    if (disabled !== undefined) changes.disabled_functions = disabled;
    const before = { allow_url_fopen: site.allow_url_fopen, disabled_functions: site.disabled_functions };
    return { action: 'site.set_php', changes, before, after: { ...before, ...changes } };
  });
}

/** Deletes a site: the node removes it, then its rows go (its quota counts until then). 202 with status pending. */
export async function deleteSite(deps: SitesDeps, actor: Actor, id: string) {
  const out = await deps.db.transaction(async (trx) => {
    const site = await siteInScope(trx, actor, id, true);
    if (site.deleting && site.status === 'pending') return { site, started: false };
    const opId = randomUUID();
    const [row]: SiteRow[] = await trx('panel_sites')
      .where({ id: site.id })
      .update({ deleting: true, generation: site.generation + 1, status: 'pending', last_op_id: opId, updated_at: trx.fn.now() })
      .returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'site.delete', siteId: row.id, domain: row.domain });
    await audit(trx, actor, { org: { id: site.org_id, path: site.org_path }, action: 'site.delete', target: { type: 'site', id: site.id }, before: siteView(site) });
    return { site: row, started: true };
  });
  return siteView(out.started ? await startOp(deps, out.site, 'site.delete') : out.site);
}

/**
 * Starts the workflow of every site's latest operation that has been pending longer than
 * `olderThanMs` (an API process that died between its commit and the start leaves one behind);
 * a workflow that exists already is left alone. Returns the ids of the sites looked at.
 */
export async function resumePendingOps(deps: Pick<SitesDeps, 'db' | 'temporal' | 'nodeOps' | 'logger'>, olderThanMs = 60_000, limit = 500): Promise<string[]> {
  const rows: Array<SiteRow & { op_kind: string; op_payload: NodeOperation }> = await deps.db('panel_sites as s')
    .join('panel_node_ops as o', 'o.id', 's.last_op_id')
    .where('s.status', 'pending')
    .whereIn('o.kind', ['site.apply', 'site.delete']) // a restore's site is built by its backup operation
    .where('s.updated_at', '<', new Date(Date.now() - olderThanMs))
    .orderBy('s.updated_at')
    .limit(limit)
    .select('s.*', 'o.kind as op_kind', 'o.payload as op_payload');
  for (const site of rows) {
    const kind = site.op_kind === 'site.delete' ? 'site.delete' : 'site.apply';
    const generation = site.op_payload.kind === 'site.apply' ? site.op_payload.site.generation : site.generation;
    try {
      await startNodeOp(deps.temporal, deps.nodeOps, { input: { opId: site.last_op_id!, node: site.node_name, siteId: site.id, orgId: site.org_id, kind, generation }, domain: site.domain });
    } catch (err) {
      deps.logger.warn({ err, site_id: site.id, op_id: site.last_op_id }, 'a pending node operation could not be resumed; retried at the next pass');
    }
  }
  return rows.map((r) => r.id);
}
