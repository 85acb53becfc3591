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
    assert.equal(p.node, 'c');
    assert.deepEqual(p.nodes.map((n) => n.node), ['c', 'b', 'd', 'a']);
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
    assert.equal(p.node, null);
    assert.deepEqual(codes(p, 'stale-facts'), ['facts_stale']);
    assert.deepEqual(codes(p, 'wrong-region'), ['wrong_region']);
    assert.deepEqual(codes(p, 'no-region'), ['wrong_region']);
    assert.deepEqual(codes(p, 'old-php'), ['php_missing']);
    assert.deepEqual(codes(p, 'stale-agent'), ['agent_stale']);
    assert.deepEqual(codes(p, 'never-pulled'), ['agent_stale']);
    assert.deepEqual(codes(p, 'preflight-failed'), ['preflight_failed']);
    assert.deepEqual(codes(p, 'no-facts'), ['no_preflight']);
    const msg = p.nodes.find((n) => n.node === 'old-php')!.reasons[0].message;
    assert.match(msg, /PHP 8\.2 is not installed/);
    assert.match(msg, /7\.4/);
    // the refused ones come by name
    assert.deepEqual(p.nodes.map((n) => n.node), nodes.map((n) => n.name).sort());
  });

  it('facts exactly 7 days old still count; a static site needs no PHP version', () => {
    const p = schedule([node('edge')], [facts('edge', { checked_at: ago(FACTS_MAX_AGE_MS).toISOString(), php_versions: [] })], req({ phpVersion: null }));
    assert.equal(p.node, 'edge');
  });

  it('refuses nodes not alive, draining or without the web role, listing every reason of a node', () => {
    const nodes = [node('dead', { state: 'dead' }), node('suspect', { state: 'suspect' }), node('drained', { draining: true }), node('db-only', { roles: ['db'] }), node('all-wrong', { state: 'dead', draining: true, roles: [], logicalRegion: 'us' })];
    const p = schedule(nodes, nodes.map((n) => facts(n.name)), req({ requiredRegion: 'eu' }));
    assert.equal(p.node, null);
    assert.deepEqual(codes(p, 'dead'), ['not_alive']);
    assert.deepEqual(codes(p, 'suspect'), ['not_alive']);
    assert.deepEqual(codes(p, 'drained'), ['draining']);
    assert.deepEqual(codes(p, 'db-only'), ['no_web_role']);
    assert.deepEqual(codes(p, 'all-wrong'), ['not_alive', 'draining', 'no_web_role', 'wrong_region']);
    assert.deepEqual(basicRefusals(node('x', { draining: true })).map((r) => r.code), ['draining']);
  });

  it('the hosting node needs no agent pulls; other nodes need the node endpoint enabled', () => {
    const nodes = [node('hosting', { lastPullAt: null, sites: 5 }), node('n1', { sites: 0 })];
    const f = nodes.map((n) => facts(n.name));
    assert.equal(schedule(nodes, f, req()).node, 'n1');
    const off = schedule(nodes, f, req({ nodeApiEnabled: false }));
    assert.equal(off.node, 'hosting');
    assert.deepEqual(codes(off, 'n1'), ['node_api_off']);
  });

  it('tells a customer only that no node can take it, and the required region when that is a reason', () => {
    const p = schedule([node('n1', { logicalRegion: 'us' })], [facts('n1')], req({ requiredRegion: 'eu' }));
    assert.deepEqual(refusalForCustomer(p, 'eu'), { detail: 'no node can take it in the required region "eu"', required_region: 'eu' });
    const q = schedule([node('n1', { draining: true })], [facts('n1')], req({ requiredRegion: 'eu' }));
    assert.deepEqual(refusalForCustomer(q, 'eu'), { detail: 'no node can take it' });
    assert.deepEqual(refusalForCustomer(schedule([], [], req()), null), { detail: 'no node can take it' });
  });

  it('roles are the labelled ones, else those the facts say', () => {
    assert.deepEqual(nodeRoles(['db'], { roles: ['web'] }), ['db']);
    assert.deepEqual(nodeRoles(null, { roles: ['web', 'db'] }), ['web', 'db']);
    assert.deepEqual(nodeRoles(null, null), []);
  });
});
