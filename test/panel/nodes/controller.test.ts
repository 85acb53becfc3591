import assert from 'node:assert/strict';
import type { NodeFacts } from '../../../domain/panel/node-ops';
import type { PanelRuntime } from '../../../main/panel-api';
import { currentLeader, type ControllerBounds } from '../../../services/panel/nodes/controller';
import { addNode, enrolNode, getNode } from '../../../services/panel/nodes/nodes';
import { startPanelChild, type PanelChild } from '../../helpers/panel-child';
import { platformAdmin, startPanel, unique } from '../../helpers/panel';
import { env } from '../../setup/env';
import { readUntil } from '../../helpers/until';

// The controller (PANEL.md section 1, spec 2 section 2.6): one leader among panel-api processes
// with -controller-state (a PostgreSQL advisory lock on a connection of its own), which writes each
// node's state from its heartbeat age; when the leader's process dies another takes over.

async function startControllerPanel(controller: Partial<ControllerBounds>): Promise<PanelRuntime> {
  return startPanel({ flags: ['-controller-state'], controller });
}

const FACTS: NodeFacts = { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:18080' };


const stateOf = async (name: string) => (await getNode(env.db, name))!.state;

describe('panel: the controller', function () {
  this.timeout(60_000);

  it('writes node state from heartbeat age: alive, then suspect, then dead (short bounds); the hosting node stays alive; a node never heard from is dead', async () => {
    const panel = await startControllerPanel({ tickMs: 100, retryMs: 100, aliveMs: 1000, suspectMs: 2000 });
    try {
      assert.ok(panel.controller?.isLeader, 'the only controller leads');
      await platformAdmin(panel.url); // the platform org (where node changes are audited)
      const { name } = await addNode(env.db, null, unique('node-'));
      const silent = (await addNode(env.db, null, unique('node-'))).name;
      const heard = Date.now();
      await enrolNode(env.db, name, { facts: FACTS, agentStartedAt: new Date().toISOString() });
      await readUntil('after a heartbeat', () => stateOf(name), (s) => s === 'alive', 900);
      const suspect = await readUntil('past aliveMs', () => stateOf(name), (s) => s !== 'alive', 3000);
      const suspectAfter = Date.now() - heard;
      assert.equal(suspect, 'suspect', 'past aliveMs the node turns suspect');
      assert.ok(suspectAfter >= 1000 && suspectAfter < 2000, `suspect after ${suspectAfter} ms`);
      await readUntil('past suspectMs', () => stateOf(name), (s) => s === 'dead', 3000);
      const deadAfter = Date.now() - heard;
      assert.ok(deadAfter >= 2000 && deadAfter < 3000, `dead after ${deadAfter} ms`);
      assert.equal(await stateOf(silent), 'dead', 'a node never heard from is dead');
      assert.equal(await stateOf('hosting'), 'alive', 'the hosting node stays alive');

      // A heartbeat brings it back at the next write.
      await enrolNode(env.db, name, { facts: FACTS, agentStartedAt: new Date().toISOString() });
      await readUntil('after a new heartbeat', () => stateOf(name), (s) => s === 'alive', 1000);
      const hosting = (await getNode(env.db, 'hosting'))!;
      assert.ok(Date.now() - hosting.last_heartbeat_at!.getTime() < 1000, "the hosting node's heartbeat is the leader's");
      assert.ok(Date.now() - hosting.state_at.getTime() < 1000, 'state as of the last write');
    } finally {
      await panel.close();
    }
    assert.equal(await currentLeader(env.db), null, 'a leader that stops leaves no leader behind');
  });

  it('one leader among two panel processes; when the leader is killed (kill -9) the other takes over within seconds', async function () {
    this.timeout(90_000);
    let child: PanelChild | null = null;
    let panel: PanelRuntime | null = null;
    try {
      child = await startPanelChild({ flags: ['-controller-state'], controller: { tickMs: 500, retryMs: 200 } });
      const first = await readUntil('the child leads', () => currentLeader(env.db), (l) => l !== null && l.leader.split(':')[1] === String(child!.pid));
      panel = await startControllerPanel({ tickMs: 500, retryMs: 200 });
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(panel.controller!.isLeader, false, 'the lock is held by the child');
      assert.equal((await currentLeader(env.db))!.leader, first!.leader, 'the child still leads');

      // The cluster page of either process says who leads; the hosting node carries the leader flag.
      const admin = await platformAdmin(panel.url);
      const page = await admin.get('/v1/cluster/nodes');
      assert.equal(page.status, 200, `cluster nodes page: ${JSON.stringify(page.json)}`);
      assert.equal(page.json.controller.leader, first!.leader, 'the cluster page names the child as leader');
      const hosting = page.json.nodes.find((n: { name: string }) => n.name === 'hosting');
      assert.equal(hosting.controller_role, 'leader', 'the hosting node carries the leader role');
      assert.equal(hosting.leader, true, 'the hosting node carries the leader flag');
      assert.ok(page.json.nodes.filter((n: { leader: boolean }) => n.leader).length === 1, `exactly one leader: ${JSON.stringify(page.json.nodes)}`);

      const killedAt = Date.now();
      await child.kill('SIGKILL');
      const next = await readUntil('another process leads', () => currentLeader(env.db), (l) => l !== null && l.leader !== first!.leader, 15_000);
      const tookOver = Date.now() - killedAt;
      assert.equal(next!.leader.split(':')[1], String(process.pid), 'this process took over the lock');
      assert.ok(panel.controller!.isLeader, 'this process leads after the first leader was killed');
      assert.ok(tookOver < 5000, `took over after ${tookOver} ms`);
      assert.ok(next!.leader_since.getTime() >= killedAt - 1000, `the new leadership began after the kill: ${next!.leader_since.toISOString()}`);
      const after = await admin.get('/v1/cluster/nodes');
      assert.equal(after.json.controller.leader, next!.leader, 'the cluster page names the new leader');
      console.log(`      leader ${first!.leader} killed; ${next!.leader} took over after ${tookOver} ms`);
    } finally {
      await child?.close();
      await panel?.close();
    }
  });
});
