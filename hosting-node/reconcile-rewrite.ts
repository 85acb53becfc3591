import fs from 'node:fs';
import { sitePaths, validateSite } from '../domain/panel/node-config';
import type { OperationResult, SiteSpec } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import { readIfExists, sha256 } from './files';
import type { NodeState } from './node-state';
import type { Cgroups } from './cgroups';
import type { SitePhp } from './php-fpm';
import { limitsOf, type SiteApply } from './site-apply';

// The reconciliation rewrite (OwnNode.rewriteSites), run in the operation queue: the managed files
// of sites the node already serves are rewritten to match their specs, a whole batch in one config
// test and one reload. What each rewrite overwrote is appended to <root>/state/reconcile.log before
// the files are written, so a crash right after cannot lose it; a repeated rewrite id returns its
// first result and is logged once.

export function createReconcileRewrite(o: { state: NodeState; site: SiteApply; php: SitePhp | null; groups: Cgroups; logger: Logger }) {
  const { state, site: apply, logger: log } = o;
  const { root, sites, ops } = state;
  const rewriteLog = `${state.paths.state}/reconcile.log`;
  /** op ids in reconcile.log (read once): a rewrite is logged once however often it is retried */
  let logged: Set<string> | null = null;
  const loggedRewrites = (): Set<string> => {
    logged ??= new Set((readIfExists(rewriteLog) ?? '').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { op: string; failed?: string }).filter((l) => !l.failed).map((l) => l.op));
    return logged;
  };

  return async (batch: Array<{ opId: string; site: SiteSpec }>): Promise<OperationResult[]> => {
    const todo = batch.filter((b) => !Object.hasOwn(ops, b.opId));
    const refusal = (s: SiteSpec): string | null => {
      const prev = sites[s.id];
      if (!prev) return `the node has no record of site ${s.id}: it is created by an operation, not rewritten`;
      if (s.generation < prev.generation) return `stale generation ${s.generation}: generation ${prev.generation} is applied`;
      if (s.phpVersion && !o.php?.has(s.phpVersion)) return `PHP ${s.phpVersion} is not available on this node`;
      return validateSite(s);
    };
    const refused = new Map(todo.map((b) => [b.opId, refusal(b.site)]));
    const go = todo.filter((b) => refused.get(b.opId) === null);
    const wanted = new Map<string, string | null>();
    for (const { site } of go) for (const f of apply.possibleFiles(site.domain)) wanted.set(f, null);
    for (const { site } of go) for (const f of apply.managedFiles(site)) wanted.set(f.path, f.text);
    const before = new Map([...wanted.keys()].map((f) => [f, readIfExists(f)]));
    const at = new Date().toISOString();
    const planned = go.map((b) => {
      const rendered = apply.managedFiles(b.site);
      const files = rendered.map((f) => ({ kind: f.kind, path: f.path, old_digest: before.get(f.path) == null ? null : sha256(before.get(f.path)!), new_digest: sha256(f.text) }));
      // files already as rendered (a retry after a crash that wrote them): nothing is overwritten now
      return { b, files, overwrites: rendered.some((f) => before.get(f.path) !== f.text) };
    });
    // written ahead of the files, so a crash after the rewrite cannot lose what it overwrote
    const ahead = planned.filter((x) => x.overwrites && !loggedRewrites().has(x.b.opId));
    const line = (x: (typeof planned)[number], extra: object = {}) => JSON.stringify({ op: x.b.opId, site: x.b.site.id, domain: x.b.site.domain, generation: x.b.site.generation, at, files: x.files, ...extra });
    if (ahead.length) fs.appendFileSync(rewriteLog, ahead.map((x) => `${line(x)}\n`).join(''));
    for (const x of ahead) loggedRewrites().add(x.b.opId);
    let failure: string | null = null;
    const recreated = new Set<string>();
    try {
      for (const { site } of go) {
        if (fs.existsSync(sitePaths(root, site.domain).docroot)) continue;
        await apply.makeSiteDirs(site, false);
        recreated.add(site.id);
      }
      for (const { site } of go) o.groups.apply(site.domain, limitsOf(site));
      await apply.commitFiles(wanted);
    } catch (err) {
      failure = (err as Error).message;
      fs.appendFileSync(rewriteLog, ahead.map((x) => `${line(x, { failed: failure })}\n`).join(''));
      for (const x of ahead) loggedRewrites().delete(x.b.opId);
    }
    for (const x of planned) if (!failure) sites[x.b.site.id] = x.b.site;
    for (const b of todo) {
      const why = refused.get(b.opId);
      const x = planned.find((y) => y.b === b);
      const result: OperationResult = why
        ? { ok: false, error: why, refused: true }
        : failure
          ? { ok: false, error: failure, refused: false }
          : { ok: true, detail: { generation: b.site.generation, files: x!.files, overwrote: x!.overwrites, docroot_recreated: recreated.has(b.site.id) } };
      ops[b.opId] = { kind: 'site.reconcile', at, result };
    }
    if (planned.length && !failure) state.saveSites();
    if (todo.length) state.saveOps();
    log.info({ rewritten: failure ? 0 : planned.filter((x) => x.overwrites).length, asked: batch.length, ...(failure ? { error: failure } : {}) }, 'reconciliation rewrite applied');
    return batch.map((b) => ops[b.opId].result);
  };
}
