// Where a new website goes (spec 2 sections 4.2 "Add website", 4.4.2). Pure: the service reads the
// node records, the operator's node facts file and the site counts, and this decides, giving every
// node's reasons so that a platform administrator sees why each node was passed over.

import { HOSTING_NODE } from './node-ops';

/** Node facts older than this do not count (spec 2 section 8). */
export const FACTS_MAX_AGE_MS = 7 * 86_400_000;
/** A node other than the hosting node qualifies only if its agent pulled this recently. */
export const AGENT_PULL_MAX_AGE_MS = 2 * 60_000;

/** A node as the scheduler sees it. */
export interface NodeCandidate {
  name: string;
  state: 'alive' | 'suspect' | 'dead';
  draining: boolean;
  /** the roles it serves: the operator's labels, else what its facts say it can serve */
  roles: string[];
  logicalRegion: string | null;
  lastPullAt: Date | null;
  /** sites recorded on it */
  sites: number;
  /** latest CPU busy share, 0..100; null when no metrics came yet */
  cpuPercent: number | null;
}

/** One entry of the `-placement-node-facts` file (spec 2 section 4.3). */
export interface PreflightFacts {
  node: string;
  preflight_passed: boolean;
  checked_at: string;
  php_versions: string[];
}

export interface PlacementRequest {
  /** null: a static site, which needs no PHP version */
  phpVersion: string | null;
  /** the account's required region (data residency), null when none */
  requiredRegion: string | null;
  /** whether agents can reach the panel at all (`-node-api-listen`) */
  nodeApiEnabled: boolean;
  now: Date;
}

export type RefusalCode =
  | 'not_alive'
  | 'draining'
  | 'no_web_role'
  | 'no_preflight'
  | 'preflight_failed'
  | 'facts_stale'
  | 'php_missing'
  | 'wrong_region'
  | 'node_api_off'
  | 'agent_stale';

export interface Refusal {
  code: RefusalCode;
  message: string;
}

export interface NodeVerdict {
  node: string;
  qualifies: boolean;
  reasons: Refusal[];
  sites: number;
  cpu_percent: number | null;
}

export interface Placement {
  /** the chosen node, null when none qualifies */
  node: string | null;
  /** every node, the chosen one first, then the other qualifying ones by load, then the rest by name */
  nodes: NodeVerdict[];
}

/** The roles of a node: what the operator labelled, else what its reported facts say it serves. */
export const nodeRoles = (labelled: string[] | null | undefined, facts: { roles?: string[] } | null | undefined): string[] => labelled ?? facts?.roles ?? [];

/** Why a node cannot take a new website at all (spec 2 section 4.2: alive, not draining, `web` role); empty if it can. */
export function basicRefusals(n: Pick<NodeCandidate, 'state' | 'draining' | 'roles'>): Refusal[] {
  const out: Refusal[] = [];
  if (n.state !== 'alive') out.push({ code: 'not_alive', message: `the node is ${n.state}, not alive` });
  if (n.draining) out.push({ code: 'draining', message: 'the node is draining: it gets no new sites' });
  if (!n.roles.includes('web')) out.push({ code: 'no_web_role', message: `the node has no web role (roles: ${n.roles.join(', ') || 'none'})` });
  return out;
}

/** Every reason `n` cannot take the site under scheduled placement; empty if it qualifies. */
export function refusals(n: NodeCandidate, facts: PreflightFacts | undefined, req: PlacementRequest): Refusal[] {
  const out = basicRefusals(n);
  if (!facts) out.push({ code: 'no_preflight', message: 'the node facts file has no entry for the node' });
  else {
    const checked = Date.parse(facts.checked_at);
    if (!facts.preflight_passed) out.push({ code: 'preflight_failed', message: 'the node did not pass its hosting-role preflight' });
    if (!Number.isFinite(checked) || req.now.getTime() - checked > FACTS_MAX_AGE_MS) {
      out.push({ code: 'facts_stale', message: `the node's facts were checked at ${facts.checked_at}, more than 7 days ago` });
    }
    if (req.phpVersion !== null && !facts.php_versions.includes(req.phpVersion)) {
      out.push({ code: 'php_missing', message: `PHP ${req.phpVersion} is not installed on the node (installed: ${facts.php_versions.join(', ') || 'none'})` });
    }
  }
  if (req.requiredRegion !== null && n.logicalRegion !== req.requiredRegion) {
    out.push({ code: 'wrong_region', message: `the account requires region "${req.requiredRegion}"; the node is in ${n.logicalRegion ? `"${n.logicalRegion}"` : 'no region'}` });
  }
  if (n.name !== HOSTING_NODE) {
    if (!req.nodeApiEnabled) out.push({ code: 'node_api_off', message: 'the node endpoint is not enabled (-node-api-listen), so no agent can pull' });
    else if (!n.lastPullAt || req.now.getTime() - n.lastPullAt.getTime() > AGENT_PULL_MAX_AGE_MS) {
      out.push({ code: 'agent_stale', message: n.lastPullAt ? `the node's agent last pulled at ${n.lastPullAt.toISOString()}, more than 2 minutes ago` : 'the node\'s agent never pulled' });
    }
  }
  return out;
}

const byName = (a: NodeVerdict, b: NodeVerdict): number => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0);

/** Least loaded first: fewest sites, then lowest CPU (unknown CPU last), then by name. */
function byLoad(a: NodeVerdict, b: NodeVerdict): number {
  const ca = a.cpu_percent ?? Infinity;
  const cb = b.cpu_percent ?? Infinity;
  return a.sites - b.sites || (ca === cb ? 0 : ca < cb ? -1 : 1) || byName(a, b);
}

/** Scheduled placement (spec 2 section 4.4.2): the least loaded qualifying node, with every node's reasons. */
export function schedule(candidates: NodeCandidate[], facts: PreflightFacts[], req: PlacementRequest): Placement {
  const factsOf = new Map(facts.map((f) => [f.node, f]));
  const verdicts = candidates.map((n): NodeVerdict => {
    const reasons = refusals(n, factsOf.get(n.name), req);
    return { node: n.name, qualifies: reasons.length === 0, reasons, sites: n.sites, cpu_percent: n.cpuPercent };
  });
  const qualifying = verdicts.filter((v) => v.qualifies).sort(byLoad);
  const rest = verdicts.filter((v) => !v.qualifies).sort(byName);
  return { node: qualifying[0]?.node ?? null, nodes: [...qualifying, ...rest] };
}

/**
 * What a caller below the platform is told when no node qualifies: only that no node can take the
 * site, and the required region when the region is among the reasons.
 */
export function refusalForCustomer(p: Placement, requiredRegion: string | null): { detail: string; required_region?: string } {
  const regionMatters = requiredRegion !== null && p.nodes.some((n) => n.reasons.some((r) => r.code === 'wrong_region'));
  return regionMatters
    ? { detail: `no node can take it in the required region "${requiredRegion}"`, required_region: requiredRegion }
    : { detail: 'no node can take it' };
}
