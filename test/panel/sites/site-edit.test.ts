import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Issue 32 item 7: PATCH /v1/sites/{id} edits aliases, PHP version, cron lines and PHP values
// (within the operator's bounds) after creation,
// as a node operation with the checks of creation (domains unique platform-wide, the domains limit,
// the PHP version present on the site's node), 400 naming the field for bad input; checked on the
// real hosting node (nginx, PHP-FPM): the vhost, pool and cron file change and the alias answers.

async function settled(c: PanelClient, id: string, timeoutMs = 30_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/sites/${id}`);
    if (r.status !== 200) throw new Error(`site ${id}: ${r.status} ${JSON.stringify(r.json)}`);
    if (r.json.status !== 'pending') return r;
    if (Date.now() > deadline) throw new Error(`site ${id} still pending after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

describe('panel: editing a site (PATCH /v1/sites/{id})', function () {
  this.timeout(120_000);
  let panel: HostingPanel;

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel();
  });
  after(async () => {
    await panel?.close();
  });

  it('changes aliases, PHP version and cron lines on the node; refuses bad input naming the field and changes nothing', async () => {
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    assert.equal((await provider.client.put(`/v1/orgs/${customer.id}/limits`, { limits: { domains: 4 } })).status, 200, 'the domains limit is set');
    const d = `${unique('edit')}.example.com`;
    const other = `${unique('other')}.example.com`;
    const created = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const id = created.json.id;
    assert.equal((await settled(customer.client, id)).json.status, 'active', 'the static site is active');
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: other })).status, 201, 'a second site');
    const outOfBounds = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `x.${d}`, php_values: { memory_limit: 4096 } });
    assert.equal(outOfBounds.status, 400, `a new site's PHP values are checked too: ${JSON.stringify(outOfBounds.json)}`);
    assert.equal(outOfBounds.json.error.details?.field, 'php_values.memory_limit', 'the field is named');

    const alias = `www.${d}`;
    const edit = await customer.client.patch(`/v1/sites/${id}`, { aliases: [alias], php_version: '8.2', cron: ['*/5 * * * * php nightly.php'] });
    assert.equal(edit.status, 200, JSON.stringify(edit.json));
    assert.equal(edit.json.status, 'pending', 'a node operation follows');
    assert.equal(edit.json.generation, 2, 'the next generation');
    const done = await settled(customer.client, id);
    assert.equal(done.json.status, 'active', JSON.stringify(done.json));
    assert.equal(done.json.applied_generation, 2, 'applied on the node');
    assert.deepEqual(done.json.aliases, [alias], 'the alias is stored');
    assert.equal(done.json.php_version, '8.2', 'the PHP version is stored');
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/nginx/sites', `${d}.conf`), 'utf8'), new RegExp(`server_name[^;]*${alias.replace(/\./g, '\\.')}`), 'the vhost names the alias');
    assert.ok(fs.existsSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${d}.conf`)), 'the PHP-FPM pool is written');
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/cron.d', d), 'utf8'), /php nightly\.php/, 'the cron line is written');
    assert.equal((await getFromNode(panel.webPort, alias)).status, 200, 'the alias answers on the node');
    const audited = await env.db('panel_audit').where({ action: 'site.edit', target_id: id }).first();
    assert.deepEqual(audited?.before, { aliases: [], php_version: null, cron: [] }, 'the audit entry has what was before');

    // per-site PHP values within the operator's bounds: in the pool as php_admin_value, and what PHP itself reports
    const values = await customer.client.patch(`/v1/sites/${id}`, { php_values: { memory_limit: 256, max_execution_time: 45 } });
    assert.equal(values.status, 200, JSON.stringify(values.json));
    assert.deepEqual(values.json.php_values, { memory_limit: 256, max_execution_time: 45 }, 'the values are stored');
    assert.equal((await settled(customer.client, id)).json.status, 'active', 'applied');
    const pool = fs.readFileSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${d}.conf`), 'utf8');
    assert.match(pool, /^php_admin_value\[memory_limit\] = 256M$/m, 'memory_limit in the pool');
    assert.match(pool, /^php_admin_value\[max_execution_time\] = 45$/m, 'max_execution_time in the pool');
    const script = '<?php ini_set("memory_limit", "2048M"); echo ini_get("memory_limit"), " ", ini_get("max_execution_time");';
    const put = await customer.client.req('PUT', `/v1/sites/${id}/files?path=v.php`, script, { 'content-type': 'application/octet-stream' });
    assert.ok(put.status === 201 || put.status === 200, `upload: ${put.status} ${JSON.stringify(put.json)}`);
    const ran = await getFromNode(panel.webPort, d, '/v.php');
    assert.equal(ran.body.trim(), '256M 45', `PHP runs with the values and the site cannot raise them: ${ran.status} ${ran.body.slice(0, 300)}`);
    const cleared = await customer.client.patch(`/v1/sites/${id}`, { php_values: { max_execution_time: null } });
    assert.deepEqual(cleared.json.php_values, { memory_limit: 256 }, 'null returns a value to the default');
    assert.equal((await settled(customer.client, id)).json.generation, 4, 'each edit is one generation');

    // bad input: 400 naming the field (or 409 for a taken domain, the domains limit), nothing changes
    const refusals: Array<[unknown, number, string, string]> = [
      [{ php_version: '8.3' }, 400, 'validation_failed', 'php_version'],
      [{ php_version: 'eight' }, 400, 'validation_failed', 'php_version'],
      [{ aliases: ['not a domain'] }, 400, 'validation_failed', 'aliases.0'],
      [{ aliases: [alias, alias] }, 400, 'validation_failed', 'aliases.1'],
      [{ aliases: [d] }, 400, 'validation_failed', 'aliases.0'],
      [{ cron: ['every minute do it'] }, 400, 'validation_failed', 'cron.0'],
      [{ domain: 'renamed.example.com' }, 400, 'validation_failed', 'domain'],
      [{}, 400, 'validation_failed', 'body'],
      [{ php_values: { memory_limit: 4096 } }, 400, 'validation_failed', 'php_values.memory_limit'],
      [{ php_values: { memory_limit: 1.5 } }, 400, 'validation_failed', 'php_values.memory_limit'],
      [{ php_values: { disable_functions: 1 } }, 400, 'validation_failed', 'php_values.disable_functions'],
      [{ aliases: [alias, other] }, 409, 'conflict', 'aliases.1'],
    ];
    for (const [body, status, code, field] of refusals) {
      const r = await customer.client.patch(`/v1/sites/${id}`, body);
      assert.equal(r.status, status, `${JSON.stringify(body)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, code, `${JSON.stringify(body)}: the code`);
      assert.equal(r.json.error.details?.field, field, `${JSON.stringify(body)}: names the field: ${JSON.stringify(r.json)}`);
    }
    const limit = await customer.client.patch(`/v1/sites/${id}`, { aliases: [alias, `a.${d}`, `b.${d}`] });
    assert.equal(limit.status, 409, JSON.stringify(limit.json));
    assert.equal(limit.json.error.code, 'limit_reached', 'the domains limit counts the added aliases');
    const unchanged = await customer.client.get(`/v1/sites/${id}`);
    assert.equal(unchanged.json.generation, 4, 'no refused edit made a generation');
    assert.deepEqual(unchanged.json.aliases, [alias], 'the aliases are as they were');

    // a removed alias is free for another site of the platform; another account cannot see the site
    assert.equal((await customer.client.patch(`/v1/sites/${id}`, { aliases: [], cron: [] })).status, 200, 'the alias and cron are removed');
    assert.equal((await settled(customer.client, id)).json.status, 'active', 'applied');
    assert.doesNotMatch(fs.readFileSync(path.join(panel.root, 'etc/nginx/sites', `${d}.conf`), 'utf8'), new RegExp(alias.replace(/\./g, '\\.')), 'the vhost no longer names the alias');
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: alias })).status, 201, 'the freed alias can be a site');
    const stranger = await createOrgWithLogin(provider.client, { type: 'customer' });
    assert.equal((await stranger.client.patch(`/v1/sites/${id}`, { aliases: [] })).status, 404, 'outside the subtree: 404');
  });
});
