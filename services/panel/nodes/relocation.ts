import { notFound } from '../../../domain/panel/errors';
import { schedule, type PreflightFacts } from '../../../domain/panel/placement';
import { effectiveRegions, loadChain } from '../shared/chain';
import { candidateOf, placementFacts, type NodeRow, type SitesDeps } from '../sites/sites';

// Relocation plan of a node (spec 2 section 4.1): read-only advice on which sites to move where, and
// why. Moving sites between nodes is planned (spec 2 section 8), so nothing here changes anything.
// Each site gets the node the scheduler would pick for it among the other nodes, counting the sites
// already advised there, so the advice spreads the load. Without a node facts file, the facts the
// nodes report themselves (PHP versions) stand in for the preflight.

export async function relocationPlan(deps: Pick<SitesDeps, 'db' | 'placement' | 'logger'>, name: string) {
  const { db } = deps;
  const nodes: NodeRow[] = await db('panel_nodes').select('*');
  const node = nodes.find((n) => n.name === name);
  if (!node) throw notFound('node');
  const why = node.state !== 'alive' ? `the node is ${node.state}` : node.draining ? 'the node is draining' : null;
  const sites: Array<{ id: string; org_id: string; domain: string; php_version: string | null; org_path: string }> = await db('panel_sites as s')
    .join('panel_orgs as o', 'o.id', 's.org_id')
    .where('s.node_name', name)
    .orderBy('s.domain')
    .select('s.id', 's.org_id', 's.domain', 's.php_version', 'o.path as org_path');
  const note = 'Read-only advice: moving sites between nodes is planned, not built (spec 2 section 8).';
  if (!why) return { node: name, state: node.state, draining: node.draining, reason_to_move: null, moves: [], note: `${note} The node is alive and not draining: nothing needs to move.` };

  const counts: Array<{ node_name: string; n: number }> = await db('panel_sites').groupBy('node_name').select('node_name', db.raw('count(*)::int AS n'));
  const load = new Map(counts.map((c) => [c.node_name, c.n]));
  const facts: PreflightFacts[] = placementFacts(deps.placement.factsFile, nodes, deps.logger);
  const others = nodes.filter((n) => n.name !== name);
  const moves = [];
  for (const site of sites) {
    const { required_region } = effectiveRegions(await loadChain(db, site.org_path));
    const p = schedule(
      others.map((n) => candidateOf(n, load.get(n.name) ?? 0)),
      facts,
      { phpVersion: site.php_version, requiredRegion: required_region, nodeApiEnabled: deps.placement.nodeApiEnabled, now: new Date() },
    );
    if (p.node) load.set(p.node, (load.get(p.node) ?? 0) + 1);
    moves.push({
      site_id: site.id,
      domain: site.domain,
      org_id: site.org_id,
      to: p.node,
      why: p.node ? `${why}; "${p.node}" is the least loaded node that qualifies for this site` : `${why}, and no other node qualifies for this site`,
      other_nodes: p.nodes.filter((v) => v.node !== p.node).map((v) => ({ node: v.node, reasons: v.reasons.map((r) => r.message) })),
    });
  }
  return { node: name, state: node.state, draining: node.draining, reason_to_move: why, moves, note };
}
