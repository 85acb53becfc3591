import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHostingNode } from '../../../hosting-node';
import { startAgent } from '../../../hosting-node/agent';
import { createPanelClient } from '../../../hosting-node/panel-client';
import { freePort } from '../../../platform/ports';
import { addNode } from '../../../services/panel/nodes/nodes';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// A node operation whose long-poll answer is lost after the panel handed it out (found by
// `npm run topology`: a node's link cut right then): handed out again once its lease runs out, and
// the node applies an id it applied already only once (its recorded result is reported again).

/** A TCP proxy to `target` that drops the first HTTP answer carrying operations (both sockets closed). */
async function droppingProxy(target: URL): Promise<{ url: string; dropped: () => number; close: () => Promise<void> }> {
  let dropped = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (dropped === 0 && chunk.toString('latin1').includes('"operations":[{')) {
        dropped++;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    dropped: () => dropped,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('panel: a node operation whose long-poll answer is lost', function () {
  this.timeout(60_000);
  let panel: HostingPanel;

  before(async function () {
    this.timeout(60_000);
    // a short lease and fallback re-read keep the test short; the operation timeout is far longer
    panel = await startHostingPanel({ flags: ['-node-api-listen', '127.0.0.1:0'], opTimeoutMs: 30_000, nodeApi: { operationLeaseMs: 1500, pollFallbackMs: 300 } });
  });
  after(async () => {
    await panel?.close();
  });

  it('is handed out again after its lease and the site ends active; a further hand-out of the applied id is acknowledged, not re-run', async () => {
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const name = unique('lost-');
    const added = await addNode(env.db, null, name);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-lost-'));
    fs.chmodSync(root, 0o755);
    const node = await startHostingNode({ root, webPort: await freePort(), webHost: '127.0.0.1', logger: env.logger });
    const proxy = await droppingProxy(new URL(panel.runtime.nodeApiUrl!));
    const agent = startAgent({ node: name, client: createPanelClient({ url: proxy.url, token: added.token }), hostingNode: node, logger: env.logger, pollWaitSeconds: 5, backoffMs: { min: 100, max: 500 } });
    try {
      await agent.enrolled;
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', roles: ['web'] });
      const created = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('lost')}.example.com`, node: name });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      const opId: string = created.json.operation_id;

      const deadline = Date.now() + 25_000;
      let site = await admin.get(`/v1/sites/${created.json.id}`);
      while (site.json.status === 'pending' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        site = await admin.get(`/v1/sites/${created.json.id}`);
      }
      assert.equal(proxy.dropped(), 1, 'the proxy dropped the answer that carried the operation');
      assert.equal(site.json.status, 'active', `the site ends active: ${JSON.stringify(site.json)}`);
      const op = await env.db('panel_node_ops').where({ id: opId }).first();
      assert.equal(op.status, 'done', 'the node reported the operation');
      assert.equal(op.attempts, 2, 'handed out twice: the lost answer, then again after the lease');

      // Handed out once more (as if its report had been lost too): the node answers with the result
      // it recorded at the first application and applies nothing again.
      const opsFile = path.join(root, 'state', 'applied-ops.json');
      const appliedAt = JSON.parse(fs.readFileSync(opsFile, 'utf8'))[opId]?.at;
      assert.ok(appliedAt, `the node recorded the operation: ${fs.readFileSync(opsFile, 'utf8').slice(0, 300)}`);
      await env.db('panel_node_ops').where({ id: opId }).update({ status: 'sent', sent_at: new Date(Date.now() - 60_000), result: null, finished_at: null });
      const again = Date.now() + 15_000;
      let reported = await env.db('panel_node_ops').where({ id: opId }).first();
      while (reported.status !== 'done' && Date.now() < again) {
        await new Promise((r) => setTimeout(r, 100));
        reported = await env.db('panel_node_ops').where({ id: opId }).first();
      }
      assert.equal(reported.status, 'done', 'the third hand-out was reported');
      assert.equal(reported.attempts, 3, 'handed out a third time');
      assert.equal(reported.result?.ok, true, `the recorded result was reported again: ${JSON.stringify(reported.result)}`);
      assert.equal(JSON.parse(fs.readFileSync(opsFile, 'utf8'))[opId]?.at, appliedAt, 'the node did not apply the operation again (its record is the first one)');
      assert.equal((await admin.get(`/v1/sites/${created.json.id}`)).json.status, 'active', 'the site stays active');
    } finally {
      await agent.stop();
      await node.stop();
      await proxy.close();
      await env.db('panel_nodes').where({ name }).update({ draining: true });
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
