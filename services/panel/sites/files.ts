import type { Readable } from 'node:stream';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { SiteFileError, type NodeFiles, type SiteDocroot } from '../../../domain/panel/own-node';
import { isBelow } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { isUuid, loadChain } from '../shared/chain';
import { checkMeasuredUse, diskHeadroom, recordSiteUsage, type MeasuredUse } from './quotas';

// The panel's file manager for a website's docroot (spec 2 section 2.3 rule 3): list, upload (the
// raw body streamed to disk, at most 50 MB) and delete, for websites on the panel's own hosting
// node only (file management on other nodes is not offered: 409). Paths are confined to the docroot
// by the node (OwnNode's site files). Uploads are soft-quota checked: refused with
// limit_reached when the measured disk or inode use of the account or any level above (plus the
// upload's growth and the uploads still under way in this process) would exceed its disk_mb or
// inodes limit, or the site's measured use its quota_mb. After every change the site is measured
// again and its usage entry replaced, so the next check sees it at once. Only the process that runs
// the hosting node writes its files, so in-flight uploads are known here.

export const MAX_UPLOAD_BYTES = 50 * 1024 * 1024;
const MB = 1024 * 1024;

export interface SiteFilesDeps {
  db: Db;
  /** the panel's own hosting node when this process runs it, else null */
  hostingNode: () => NodeFiles | null;
}

interface FilesSite {
  id: string;
  org_id: string;
  org_path: string;
  domain: string;
  node_name: string;
  quota_mb: number;
  deleting: boolean;
  /** its docroot on the node, written as the site's own user */
  files: SiteDocroot;
}

/** The site `id` in the actor's subtree (else 404), on the hosting node this process runs (else 409), with its docroot. */
async function siteForFiles(deps: SiteFilesDeps, actor: Actor, id: string): Promise<FilesSite> {
  if (!isUuid(id)) throw notFound('site');
  const site = await deps.db('panel_sites as s').join('panel_orgs as o', 'o.id', 's.org_id').where('s.id', id).first('s.id', 's.org_id', 's.domain', 's.node_name', 's.quota_mb', 's.deleting', 'o.path as org_path');
  if (!site || !(site.org_id === actor.orgId || isBelow(site.org_path, actor.orgPath))) throw notFound('site');
  if (site.node_name !== HOSTING_NODE) {
    throw new PanelError('conflict', { node: site.node_name, detail: `the website ${site.domain} is on node "${site.node_name}": file management is offered for websites on the panel's own hosting node only` });
  }
  if (site.deleting) throw new PanelError('conflict', { detail: `the website ${site.domain} is being deleted` });
  const node = deps.hostingNode();
  if (!node) throw new PanelError('conflict', { detail: 'this panel process does not run the hosting node: file management is offered by the one that does' });
  return { ...site, files: node.site({ id: site.id, domain: site.domain }) };
}

/** The panel error of a refused file operation. */
function fileError(err: unknown): unknown {
  if (!(err instanceof SiteFileError)) return err;
  switch (err.problem) {
    case 'bad_path':
      return invalid('path', err.message);
    case 'not_found':
      return new PanelError('not_found', { what: 'file or folder', detail: err.message });
    case 'too_large':
      return invalid('body', `larger than ${MAX_UPLOAD_BYTES / MB} MB`);
    default:
      return new PanelError('conflict', { field: 'path', detail: err.message });
  }
}

const mapped = async <T>(p: Promise<T>): Promise<T> => {
  try {
    return await p;
  } catch (err) {
    throw fileError(err);
  }
};

// ---- uploads under way (this process) ---------------------------------------------------------

interface Reservation extends MeasuredUse {
  siteId: string;
  orgPath: string;
}
const underWay = new Set<Reservation>();

/** What the uploads under way below `path` will add (other than `except`). */
const pendingBelow = (except: Reservation) => (path: string): MeasuredUse => {
  const out = { diskMb: 0, inodes: 0 };
  for (const r of underWay) {
    if (r === except || !r.orgPath.startsWith(path)) continue;
    out.diskMb += Math.max(0, r.diskMb);
    out.inodes += r.inodes;
  }
  return out;
};

// The checks of uploads run one at a time (a measurement and a few reads), each reserving what it
// admits before the next looks: so concurrent uploads never admit more than fits together. The
// streams themselves run side by side.
let checks: Promise<unknown> = Promise.resolve();
function oneCheckAtATime<T>(fn: () => Promise<T>): Promise<T> {
  const run = checks.then(fn, fn);
  checks = run.catch(() => undefined);
  return run;
}

const pendingOfSite = (except: Reservation, siteId: string) => [...underWay].filter((r) => r !== except && r.siteId === siteId).reduce((a, r) => a + Math.max(0, r.diskMb), 0);

/** Measures the site's docroot now and records it as its latest usage. */
async function remeasure(db: Db, site: FilesSite): Promise<MeasuredUse> {
  const at = Date.now();
  const use = await site.files.usage();
  await recordSiteUsage(db, HOSTING_NODE, site.id, use, at);
  return use;
}

const quotaReached = (site: FilesSite, used: number, adding: number) =>
  new PanelError('limit_reached', {
    limit: 'quota_mb',
    level: `website "${site.domain}"`,
    value: site.quota_mb,
    used: Math.round(used * 100) / 100,
    detail: `${Math.round(used * 100) / 100} MB are measured in its docroot${adding > 0 ? ` and ${Math.round(adding * 100) / 100} MB more do not fit` : ''}, so the upload is refused (soft quota)`,
  });

// ---- the API's functions --------------------------------------------------------------------

export async function listSiteFiles(deps: SiteFilesDeps, actor: Actor, siteId: string, rel: string) {
  const site = await siteForFiles(deps, actor, siteId);
  return { site_id: site.id, ...(await mapped(site.files.list(rel))) };
}

/**
 * Uploads `body` to `rel` in the site's docroot (missing folders are created), replacing a file
 * there. `length`: the request's Content-Length, checked before anything is read; without it the
 * stream is cut at the room left (and at 50 MB).
 */
export async function uploadSiteFile(deps: SiteFilesDeps, actor: Actor, siteId: string, rel: string, body: Readable, length: number | null) {
  if (length !== null && length > MAX_UPLOAD_BYTES) throw invalid('body', `larger than ${MAX_UPLOAD_BYTES / MB} MB`);
  const site = await siteForFiles(deps, actor, siteId);
  const target = await mapped(site.files.uploadTarget(rel));
  const inodes = (target.exists ? 0 : 1) + target.missingFolders;
  const me: Reservation = { siteId: site.id, orgPath: site.org_path, diskMb: length === null ? 0 : (length - target.size) / MB, inodes };
  const admitted = await oneCheckAtATime(async () => {
    const now = await remeasure(deps.db, site);
    const chain = await loadChain(deps.db, site.org_path);
    const pending = pendingBelow(me);
    const siteUsed = now.diskMb + pendingOfSite(me, site.id);
    await checkMeasuredUse(deps.db, chain, { diskMb: me.diskMb, inodes }, 'the upload is refused', pending);
    let cap = MAX_UPLOAD_BYTES;
    let capReason: PanelError | null = null;
    if (length !== null) {
      if (me.diskMb > 0 && siteUsed + me.diskMb > site.quota_mb) throw quotaReached(site, siteUsed, me.diskMb);
    } else {
      // unknown size: the stream may use the room left at the tightest level and in the site's quota
      const room = await diskHeadroom(deps.db, chain, pending);
      const siteRoom = site.quota_mb - siteUsed;
      const roomMb = Math.min(room?.mb ?? Infinity, siteRoom);
      if (roomMb <= 0) throw room && room.mb <= siteRoom ? limitOf(room) : quotaReached(site, siteUsed, 0);
      const roomBytes = Math.floor(roomMb * MB) + target.size;
      if (roomBytes < cap) {
        cap = roomBytes;
        capReason = room && room.mb <= siteRoom ? limitOf(room) : quotaReached(site, siteUsed, 0);
      }
      me.diskMb = (cap - target.size) / MB;
    }
    underWay.add(me);
    return { cap, capReason };
  });
  const { cap, capReason } = admitted;
  try {
    let written: { path: string; bytes: number };
    try {
      // a body over its cap is still read (and dropped) up to the 50 MB maximum and a little, so the answer reaches the client
      written = await site.files.write(rel, body, cap, MAX_UPLOAD_BYTES + MB);
    } catch (err) {
      if (err instanceof SiteFileError && err.problem === 'too_large' && capReason) throw capReason;
      throw fileError(err);
    }
    const after = await remeasure(deps.db, site);
    await audit(deps.db, actor, { org: { id: site.org_id, path: site.org_path }, action: 'site.file.upload', target: { type: 'site', id: site.id }, after: { path: written.path, bytes: written.bytes, replaced: target.exists } });
    return { site_id: site.id, path: written.path, bytes: written.bytes, replaced: target.exists, usage: { disk_mb: after.diskMb, inodes: after.inodes } };
  } finally {
    underWay.delete(me);
  }
}

const limitOf = (room: { level: { id: string; type: string; name: string }; limit: number; used: number }) =>
  new PanelError('limit_reached', {
    limit: 'disk_mb',
    level: `${room.level.type} "${room.level.name}"`,
    value: room.limit,
    org_id: room.level.id,
    used: Math.round(room.used * 100) / 100,
    detail: `${Math.round(room.used * 100) / 100} MB are measured in use below it and the upload does not fit (soft quota)`,
  });

/** Deletes a file, link or folder (with its contents) of the site's docroot; never the docroot itself. */
export async function deleteSiteFile(deps: SiteFilesDeps, actor: Actor, siteId: string, rel: string) {
  const site = await siteForFiles(deps, actor, siteId);
  const removed = await mapped(site.files.remove(rel));
  const after = await remeasure(deps.db, site);
  await audit(deps.db, actor, { org: { id: site.org_id, path: site.org_path }, action: 'site.file.delete', target: { type: 'site', id: site.id }, before: removed });
  return { site_id: site.id, ...removed, usage: { disk_mb: after.diskMb, inodes: after.inodes } };
}
