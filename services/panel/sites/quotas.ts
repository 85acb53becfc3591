import type { Knex } from 'knex';
import { PanelError } from '../../../domain/panel/errors';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { pathIds } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { effectiveLimits, findInScope, loadChain, ownLimits, type ChainLevel } from '../shared/chain';

// Soft quotas (spec 2 section 2.3 rules 3-4): disk and inode use as the nodes measure it (each
// node reports every site's docroot: panel_nodes.site_usage, from heartbeats and the hosting node's
// own reports), summed per account and per subtree, against the disk_mb and inodes limits. The
// panel refuses its own writes (file uploads, new websites) at the limit; writes by PHP, SFTP and
// cron are not stopped (hard quotas are planned). Memory is read on the panel's hosting node only.

type Q = Knex | Knex.Transaction;

export interface MeasuredUse {
  diskMb: number;
  inodes: number;
}

// The latest measurement of every site of a subtree, from the report of the node the site is on.
const SITE_USAGE_SQL = `
  SELECT s.id AS site_id, s.org_id, s.domain, s.node_name, (u->>'diskMb')::float8 AS disk_mb, (u->>'inodes')::bigint AS inodes
  FROM panel_sites s
  JOIN panel_orgs o ON o.id = s.org_id
  JOIN panel_nodes n ON n.name = s.node_name
  CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(n.site_usage) = 'array' THEN n.site_usage ELSE '[]'::jsonb END) u
  WHERE o.path LIKE ? AND u->>'siteId' = s.id::text`;

/** Measured disk and inode use of every site below `path` (the org itself included). */
export async function measuredBySite(q: Q, path: string): Promise<Array<{ site_id: string; org_id: string; domain: string; node_name: string; disk_mb: number; inodes: number }>> {
  const { rows } = await q.raw(SITE_USAGE_SQL, [`${path}%`]);
  return rows.map((r: { inodes: string | number; disk_mb: number }) => ({ ...r, inodes: Number(r.inodes), disk_mb: Number(r.disk_mb) }));
}

/** Measured disk and inode use of the sites below `path` (the org itself included). */
export async function measuredUse(q: Q, path: string): Promise<MeasuredUse> {
  const { rows } = await q.raw(`SELECT coalesce(sum(disk_mb), 0)::float8 AS disk_mb, coalesce(sum(inodes), 0)::bigint AS inodes FROM (${SITE_USAGE_SQL}) m`, [`${path}%`]);
  return { diskMb: Number(rows[0].disk_mb), inodes: Number(rows[0].inodes) };
}

/** The website quotas (MB) allocated to the sites below `path` (the org itself included). */
export async function allocatedQuotaMb(q: Q, path: string): Promise<number> {
  const row = await q('panel_sites as s').join('panel_orgs as o', 'o.id', 's.org_id').where('o.path', 'like', `${path}%`).first(q.raw('coalesce(sum(s.quota_mb), 0)::bigint AS used'));
  return Number(row.used);
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Refuses with limit_reached when, at any level of `chain` with a disk_mb or inodes limit, the
 * measured use below it plus what `adding` grows would exceed that limit (a dimension that does not
 * grow is not checked); with `adding` 'at-limit', when the use is at or above a limit already
 * (nothing new at the limit: new websites).
 */
export async function checkMeasuredUse(q: Q, chain: ChainLevel[], adding: MeasuredUse | 'at-limit', what: string, pending?: (path: string) => MeasuredUse): Promise<void> {
  const add = adding === 'at-limit' ? { diskMb: 0, inodes: 0 } : adding;
  const over = (limit: number | null, use: number, grows: number) => limit !== null && (adding === 'at-limit' ? use >= limit : grows > 0 && use + grows > limit);
  for (const level of chain) {
    const own = ownLimits(level);
    const disk = own.disk_mb ?? null;
    const inodes = own.inodes ?? null;
    if (disk === null && inodes === null) continue;
    if (adding !== 'at-limit' && !((disk !== null && add.diskMb > 0) || (inodes !== null && add.inodes > 0))) continue;
    const measured = await measuredUse(q, level.path);
    // what writes under way below this level will add (the file manager's uploads in progress)
    const more = pending?.(level.path) ?? { diskMb: 0, inodes: 0 };
    const used = { diskMb: measured.diskMb + more.diskMb, inodes: measured.inodes + more.inodes };
    if (over(disk, used.diskMb, add.diskMb)) {
      throw new PanelError('limit_reached', {
        limit: 'disk_mb',
        level: `${level.type} "${level.name}"`,
        value: disk,
        org_id: level.id,
        used: round2(used.diskMb),
        detail: `${round2(used.diskMb)} MB are measured in use below it${add.diskMb > 0 ? ` and ${round2(add.diskMb)} MB more do not fit` : ''}, so ${what} (soft quota)`,
      });
    }
    if (over(inodes, used.inodes, add.inodes)) {
      throw new PanelError('limit_reached', {
        limit: 'inodes',
        level: `${level.type} "${level.name}"`,
        value: inodes,
        org_id: level.id,
        used: used.inodes,
        detail: `${used.inodes} files and folders are measured below it${add.inodes > 0 ? ` and ${add.inodes} more do not fit` : ''}, so ${what} (soft quota)`,
      });
    }
  }
}

/**
 * The disk room left below the tightest level of `chain` (MB; its disk_mb minus measured and pending
 * use), with that level; null when no level has a disk_mb limit.
 */
export async function diskHeadroom(q: Q, chain: ChainLevel[], pending?: (path: string) => MeasuredUse): Promise<{ mb: number; level: ChainLevel; limit: number; used: number } | null> {
  let best: { mb: number; level: ChainLevel; limit: number; used: number } | null = null;
  for (const level of chain) {
    const limit = ownLimits(level).disk_mb;
    if (limit === undefined || limit === null) continue;
    const used = (await measuredUse(q, level.path)).diskMb + (pending?.(level.path).diskMb ?? 0);
    if (!best || limit - used < best.mb) best = { mb: limit - used, level, limit, used };
  }
  return best;
}

/**
 * Replaces one site's entry in the latest usage its node reported (the panel's file manager measures
 * the site again after each change, so the next check does not wait for the node's next report).
 */
export async function recordSiteUsage(q: Q, node: string, siteId: string, use: MeasuredUse, at: number): Promise<void> {
  // `at` (epoch ms, when the measurement began): an older measurement finishing late changes nothing
  await q.raw(
    `UPDATE panel_nodes SET site_usage = coalesce(
       (SELECT jsonb_agg(e) FROM jsonb_array_elements(CASE WHEN jsonb_typeof(site_usage) = 'array' THEN site_usage ELSE '[]'::jsonb END) e WHERE e->>'siteId' <> ?),
       '[]'::jsonb) || jsonb_build_array(jsonb_build_object('siteId', ?::text, 'diskMb', ?::float8, 'inodes', ?::bigint, 'at', ?::bigint))
     WHERE name = ? AND NOT EXISTS (
       SELECT 1 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(site_usage) = 'array' THEN site_usage ELSE '[]'::jsonb END) e
       WHERE e->>'siteId' = ? AND (e->>'at')::bigint > ?)`,
    [siteId, siteId, use.diskMb, use.inodes, at, node, siteId, at],
  );
}

// ---- the usage page -------------------------------------------------------------------------

export const WARN_PERCENT = 80;

const percentOf = (used: number, limit: number | null) => (limit === null ? null : limit === 0 ? (used > 0 ? 100 : 0) : round2((used / limit) * 100));

/** How the hosting node's PHP workers use memory per pool (site domain); null when this process does not run the hosting node. */
export type PoolMemory = () => Promise<Map<string, number> | null>;

/**
 * `GET /v1/orgs/{id}/usage`: every customer account of the subtree with its measured disk and inode
 * use (the sum of its sites' latest measurements) against its effective disk_mb and inodes limits,
 * and its PHP workers' memory against memory_mb for its sites on the hosting node only. Accounts at
 * or above 80 % of a limit come first, then by name.
 */
export async function accountUsage(db: Db, actor: Actor, orgId: string, poolMemory: PoolMemory) {
  const org = await findInScope(db, actor, orgId);
  const [above, below, sites, counts, nodes, memory] = await Promise.all([
    loadChain(db, org.path),
    db('panel_orgs as o')
      .leftJoin('panel_packages as p', 'p.id', 'o.package_id')
      .where('o.path', 'like', `${org.path}%`)
      .select('o.*', 'p.limits as package_limits', 'p.preferred_region as package_preferred_region', 'p.required_region as package_required_region') as Promise<ChainLevel[]>,
    measuredBySite(db, org.path),
    db('panel_sites as s')
      .join('panel_orgs as o', 'o.id', 's.org_id')
      .where('o.path', 'like', `${org.path}%`)
      .groupBy('s.org_id')
      .select('s.org_id', db.raw('count(*)::int AS sites'), db.raw('count(*) FILTER (WHERE s.node_name = ?)::int AS on_hosting', [HOSTING_NODE])) as Promise<Array<{ org_id: string; sites: number; on_hosting: number }>>,
    db('panel_nodes').select('name', 'site_usage_at', 'metrics', 'metrics_at') as Promise<Array<{ name: string; site_usage_at: Date | null; metrics: { memory?: { totalMb: number; availableMb: number } } | null; metrics_at: Date | null }>>,
    poolMemory(),
  ]);
  const levels = new Map<string, ChainLevel>([...above, ...below].map((l) => [l.id, l]));
  const siteCounts = new Map(counts.map((c) => [c.org_id, c]));
  const hostingDomains = new Map<string, string[]>();
  for (const s of await db('panel_sites as s').join('panel_orgs as o', 'o.id', 's.org_id').where('o.path', 'like', `${org.path}%`).where('s.node_name', HOSTING_NODE).select('s.org_id', 's.domain')) {
    hostingDomains.set(s.org_id, [...(hostingDomains.get(s.org_id) ?? []), s.domain]);
  }
  const usageAt = new Map(nodes.map((n) => [n.name, n.site_usage_at]));

  const accounts = below
    .filter((o) => o.type === 'customer')
    .map((o) => {
      const chain = pathIds(o.path).map((id) => levels.get(id)).filter((l): l is ChainLevel => l !== undefined);
      const eff = effectiveLimits(chain);
      const mine = sites.filter((s) => s.org_id === o.id);
      const diskMb = round2(mine.reduce((a, s) => a + s.disk_mb, 0));
      const inodes = mine.reduce((a, s) => a + s.inodes, 0);
      const count = siteCounts.get(o.id) ?? { sites: 0, on_hosting: 0 };
      const times = [...new Set(mine.map((s) => s.node_name))].map((n) => usageAt.get(n)).filter((t): t is Date => !!t);
      const memUsed = memory === null ? null : round2((hostingDomains.get(o.id) ?? []).reduce((a, d) => a + (memory.get(d) ?? 0), 0));
      const item = (used: number | null, key: 'disk_mb' | 'inodes' | 'memory_mb') => ({
        used,
        limit: eff[key].value,
        set_by: eff[key].setBy,
        percent: used === null ? null : percentOf(used, eff[key].value),
      });
      const disk = item(diskMb, 'disk_mb');
      const files = item(inodes, 'inodes');
      const mem = { ...item(memUsed, 'memory_mb'), sites_measured: count.on_hosting, sites_not_measured: count.sites - count.on_hosting };
      const top = Math.max(disk.percent ?? 0, files.percent ?? 0, mem.percent ?? 0);
      return {
        org_id: o.id,
        name: o.name,
        status: o.status,
        sites: count.sites,
        sites_measured: mine.length,
        measured_at: times.length ? new Date(Math.min(...times.map((t) => new Date(t).getTime()))) : null,
        disk_mb: disk,
        inodes: files,
        memory_mb: mem,
        level: top >= 100 ? 'at_limit' : top >= WARN_PERCENT ? 'warning' : 'ok',
        max_percent: top,
      };
    })
    .sort((a, b) => Number(b.max_percent >= WARN_PERCENT) - Number(a.max_percent >= WARN_PERCENT) || a.name.localeCompare(b.name) || a.org_id.localeCompare(b.org_id));

  const hosting = nodes.find((n) => n.name === HOSTING_NODE);
  const m = hosting?.metrics?.memory;
  return {
    org_id: org.id,
    warn_percent: WARN_PERCENT,
    accounts,
    memory: {
      scope: 'hosting node only',
      note:
        "Memory is read on the panel's own hosting node only (spec 2.3 rule 4): an account's memory_mb use is the resident memory of its sites' PHP workers there; sites on other nodes are not measured." +
        (memory === null ? ' This panel process does not run the hosting node, so no account memory is shown.' : ''),
      node: HOSTING_NODE,
      total_mb: m ? m.totalMb : null,
      available_mb: m ? m.availableMb : null,
      measured_at: hosting?.metrics_at ?? null,
    },
    disk_note: 'Disk and inodes are measured on the nodes (each site docroot) and enforced soft: the panel refuses its own uploads and new websites at the limit; PHP, SFTP and cron writes are not stopped.',
  };
}
