import assert from 'node:assert/strict';
import { AGENT_PULL_MAX_AGE_MS, basicRefusals, FACTS_MAX_AGE_MS, nodeRoles, refusalForCustomer, schedule, type NodeCandidate, type PlacementRequest, type PreflightFacts } from '../../../domain/panel/placement';

// Scheduled placement (spec 2 section 4.4.2), pure: the least loaded qualifying node, and every
// node's reasons when it does not qualify.

const NOW = new Date('2026-12-28T12:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);

const node = (name: string, o: Partial<NodeCandidate> = {}): NodeCandidate => ({
  name,
  state: 'alive',
  draining: false,
  roles: ['web'],
  logicalRegion: 'eu',
  lastPullAt: ago(10_000),
  sites: 0,
  cpuPercent: 10,
  ...o,
});

const facts = (name: string, o: Partial<PreflightFacts> = {}): PreflightFacts => ({ node: name, preflight_passed: true, checked_at: ago(86_400_000).toISOString(), php_versions: ['8.2', '8.3'], ...o });

const req = (o: Partial<PlacementRequest> = {}): PlacementRequest => ({ phpVersion: '8.2', requiredRegion: null, nodeApiEnabled: true, now: NOW, ...o });

const codes = (p: ReturnType<typeof schedule>, name: string) => p.nodes.find((n) => n.node === name)!.reasons.map((r) => r.code);

describe('panel: scheduled placement (domain/panel/placement.ts)', () => {
  it('picks the node with the fewest sites, ties broken by the lowest CPU, unknown CPU last', () => {
    const nodes = [node('a', { sites: 3, cpuPercent: 1 }), node('b', { sites: 1, cpuPercent: 50 }), node('c', { sites: 1, cpuPercent: 20 }), node('d', { sites: 1, cpuPercent: null })];
    const p = schedule(nodes, nodes.map((n) => facts(n.name)), req());
    assert.equal(p.node, 'c', `c wins: fewest sites, then the lower CPU: ${JSON.stringify(p.nodes)}`);
    assert.deepEqual(p.nodes.map((n) => n.node), ['c', 'b', 'd', 'a'], 'ordered by sites, then CPU, unknown CPU last');
    assert.ok(p.nodes.every((n) => n.qualifies && n.reasons.length === 0), `every node qualifies: ${JSON.stringify(p.nodes)}`);
  });

  it('gives each node its reasons: stale facts, wrong region, missing PHP version, stale agent, failed preflight, no facts', () => {
    const nodes = [
      node('stale-facts'),
      node('wrong-region', { logicalRegion: 'us' }),
      node('no-region', { logicalRegion: null }),
      node('old-php'),
      node('stale-agent', { lastPullAt: ago(AGENT_PULL_MAX_AGE_MS + 1000) }),
      node('never-pulled', { lastPullAt: null }),
      node('preflight-failed'),
      node('no-facts'),
    ];
    const f = [
      facts('stale-facts', { checked_at: ago(FACTS_MAX_AGE_MS + 60_000).toISOString() }),
      facts('wrong-region'),
      facts('no-region'),
      facts('old-php', { php_versions: ['7.4'] }),
      facts('stale-agent'),
      facts('never-pulled'),
      facts('preflight-failed', { preflight_passed: false }),
    ];
    const p = schedule(nodes, f, req({ requiredRegion: 'eu' }));
    assert.equal(p.node, null, `no node qualifies: ${JSON.stringify(p.nodes)}`);
    assert.deepEqual(codes(p, 'stale-facts'), ['facts_stale'], 'facts older than the limit are stale');
    assert.deepEqual(codes(p, 'wrong-region'), ['wrong_region'], 'a node in another region is refused');
    assert.deepEqual(codes(p, 'no-region'), ['wrong_region'], 'a node without a region is refused when one is required');
    assert.deepEqual(codes(p, 'old-php'), ['php_missing'], 'a node without the requested PHP version is refused');
    assert.deepEqual(codes(p, 'stale-agent'), ['agent_stale'], 'an agent that has not pulled lately is stale');
    assert.deepEqual(codes(p, 'never-pulled'), ['agent_stale'], 'an agent that never pulled is stale');
    assert.deepEqual(codes(p, 'preflight-failed'), ['preflight_failed'], 'a failed preflight refuses the node');
    assert.deepEqual(codes(p, 'no-facts'), ['no_preflight'], 'a node without facts has no preflight');
    const msg = p.nodes.find((n) => n.node === 'old-php')!.reasons[0].message;
    assert.match(msg, /PHP 8\.2 is not installed/, 'the reason names the missing PHP version');
    assert.match(msg, /7\.4/, 'the reason lists the installed PHP versions');
    // the refused ones come by name
    assert.deepEqual(p.nodes.map((n) => n.node), nodes.map((n) => n.name).sort(), 'every node, refused ones too, is listed by name');
  });

  it('facts exactly 7 days old still count; a static site needs no PHP version', () => {
    const p = schedule([node('edge')], [facts('edge', { checked_at: ago(FACTS_MAX_AGE_MS).toISOString(), php_versions: [] })], req({ phpVersion: null }));
    assert.equal(p.node, 'edge', `facts exactly at the age limit count and a static site needs no PHP: ${JSON.stringify(p.nodes)}`);
  });

  it('refuses nodes not alive, draining or without the web role, listing every reason of a node', () => {
    const nodes = [node('dead', { state: 'dead' }), node('suspect', { state: 'suspect' }), node('drained', { draining: true }), node('db-only', { roles: ['db'] }), node('all-wrong', { state: 'dead', draining: true, roles: [], logicalRegion: 'us' })];
    const p = schedule(nodes, nodes.map((n) => facts(n.name)), req({ requiredRegion: 'eu' }));
    assert.equal(p.node, null, `no node qualifies: ${JSON.stringify(p.nodes)}`);
    assert.deepEqual(codes(p, 'dead'), ['not_alive'], 'a dead node is not alive');
    assert.deepEqual(codes(p, 'suspect'), ['not_alive'], 'a suspect node is not alive');
    assert.deepEqual(codes(p, 'drained'), ['draining'], 'a draining node is refused');
    assert.deepEqual(codes(p, 'db-only'), ['no_web_role'], 'a node without the web role is refused');
    assert.deepEqual(codes(p, 'all-wrong'), ['not_alive', 'draining', 'no_web_role', 'wrong_region'], 'every reason of a node is listed, in order');
    assert.deepEqual(basicRefusals(node('x', { draining: true })).map((r) => r.code), ['draining'], 'basicRefusals refuses a draining node');
  });

  it('the hosting node needs no agent pulls; other nodes need the node endpoint enabled', () => {
    const nodes = [node('hosting', { lastPullAt: null, sites: 5 }), node('n1', { sites: 0 })];
    const f = nodes.map((n) => facts(n.name));
    assert.equal(schedule(nodes, f, req()).node, 'n1', 'with the node API on, the emptier agent node wins');
    const off = schedule(nodes, f, req({ nodeApiEnabled: false }));
    assert.equal(off.node, 'hosting', 'with the node API off, only the hosting node qualifies');
    assert.deepEqual(codes(off, 'n1'), ['node_api_off'], 'the agent node is refused because the node API is off');
  });

  it('tells a customer only that no node can take it, and the required region when that is a reason', () => {
    const p = schedule([node('n1', { logicalRegion: 'us' })], [facts('n1')], req({ requiredRegion: 'eu' }));
    assert.deepEqual(refusalForCustomer(p, 'eu'), { detail: 'no node can take it in the required region "eu"', required_region: 'eu' }, 'the customer is told the required region when it is the reason');
    const q = schedule([node('n1', { draining: true })], [facts('n1')], req({ requiredRegion: 'eu' }));
    assert.deepEqual(refusalForCustomer(q, 'eu'), { detail: 'no node can take it' }, 'the customer is told only that no node can take it');
    assert.deepEqual(refusalForCustomer(schedule([], [], req()), null), { detail: 'no node can take it' }, 'no nodes at all: the plain refusal');
  });

  it('roles are the labelled ones, else those the facts say', () => {
    assert.deepEqual(nodeRoles(['db'], { roles: ['web'] }), ['db'], 'labelled roles win over the facts');
    assert.deepEqual(nodeRoles(null, { roles: ['web', 'db'] }), ['web', 'db'], "without labels, the facts' roles are used");
    assert.deepEqual(nodeRoles(null, null), [], 'no labels and no facts: no roles');
  });
});
