import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startHostingNode } from '../../../hosting-node';
import { startAgent } from '../../../hosting-node/agent';
import { createPanelClient } from '../../../hosting-node/panel-client';
import { freePort } from '../../../platform/ports';
import { addNode } from '../../../services/panel/nodes/nodes';
import { checkCertificatePair } from '../../../services/panel/certificates/check';
import { specOf } from '../../../services/panel/sites/sites';
import { getOverTls, makeCertificate } from '../../helpers/certificates';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, tablesContaining, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// TLS certificates attached to websites, over real HTTP into a panel whose hosting node runs nginx
// with a TLS port: attach → the site answers HTTPS by SNI with that certificate; bad certificates
// are refused with nothing changed; the key is never readable through the API nor left in clear in
// any table; later changes keep TLS (the node keeps the key); removal ends TLS for the site.

const keyBody = (pem: string) => pem.split('\n').filter((l) => l && !l.startsWith('-----')).join('').slice(0, 64);

/** Waits until the site's latest generation is applied (active or suspended), as `c` reads it. */
async function applied(c: PanelClient, id: string, timeoutMs = 30_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/sites/${id}`);
    if (r.status !== 200) throw new Error(`site ${id}: ${r.status} ${JSON.stringify(r.json)}`);
    if (r.json.status === 'failed') throw new Error(`site ${id} failed: ${r.json.error}`);
    if (r.json.status !== 'pending' && r.json.applied_generation === r.json.generation) return r;
    if (Date.now() > deadline) throw new Error(`site ${id} still ${r.json.status} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** The TLS handshake for `host` is refused (no site's certificate covers it). */
const refusedTls = (panel: HostingPanel, host: string) => assert.rejects(getOverTls(panel.webTlsPort!, host), /alert|handshake|EPROTO|unrecognized name/i);

describe('panel: TLS certificates on websites (PUT/GET/DELETE /v1/sites/{id}/certificate, nginx by SNI)', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let customer: { id: string; client: PanelClient };

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ tls: true, backups: true, opTimeoutMs: 30_000 });
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    customer = await createOrgWithLogin(provider.client, { type: 'customer' });
  });
  after(async () => {
    await panel?.close();
  });

  const newSite = async (aliases: string[] = []) => {
    const domain = `${unique('tls').toLowerCase()}.test`;
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, aliases: aliases.map((a) => `${a}.${domain}`) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    await applied(customer.client, r.json.id);
    return { id: r.json.id as string, domain };
  };

  /** A new site with a certificate for all its names attached and applied. */
  const siteWithCertificate = async (o: { aliases?: string[]; key?: 'ec' | 'rsa2048' } = {}) => {
    const site = await newSite(o.aliases);
    const cert = makeCertificate({ names: [site.domain, ...(o.aliases ?? []).map((a) => `${a}.${site.domain}`)], key: o.key });
    const put = await customer.client.put(`/v1/sites/${site.id}/certificate`, { certificate: cert.certificate, private_key: cert.key });
    assert.equal(put.status, 200, JSON.stringify(put.json));
    await applied(customer.client, site.id);
    return { site, cert, put };
  };

  it('attach: the site answers HTTPS on the TLS port with that certificate for its domain and alias; GET shows it, never the key', async () => {
    const { site, cert, put } = await siteWithCertificate({ aliases: ['www'] });
    assert.equal(put.json.site.generation, 2, "attaching a certificate is the site's second generation");
    assert.deepEqual(put.json.certificate.covers, [site.domain, `www.${site.domain}`], 'the certificate covers the domain and its alias');
    assert.equal((await customer.client.get(`/v1/sites/${site.id}`)).json.status, 'active', 'the site is active again after the attach');

    const https = await getOverTls(panel.webTlsPort!, site.domain);
    assert.equal(https.status, 200, `the site answers HTTPS by its domain: ${https.body.slice(0, 300)}`);
    assert.match(https.body, new RegExp(`${site.domain.replace(/\./g, '\\.')} works`), "the HTTPS answer is the site's own page");
    assert.equal(https.fingerprint256, put.json.certificate.fingerprint_sha256, "the site's domain is served with the attached certificate");
    assert.equal((await getOverTls(panel.webTlsPort!, `www.${site.domain}`)).fingerprint256, put.json.certificate.fingerprint_sha256, 'the alias is served with the attached certificate');
    // plain HTTP still serves; a name no certificate covers gets no handshake
    assert.equal((await getFromNode(panel.webPort, site.domain)).status, 200, 'plain HTTP still serves the site');
    await refusedTls(panel, 'nobody.test');

    const got = await customer.client.get(`/v1/sites/${site.id}/certificate`);
    assert.equal(got.status, 200, `GET certificate answers: ${JSON.stringify(got.json)}`);
    assert.deepEqual(got.json.sans, [site.domain, `www.${site.domain}`], "GET shows the certificate's names");
    assert.equal(got.json.key.type, 'ec', 'GET shows the key type, not the key');
    assert.equal(got.json.fingerprint_sha256, put.json.certificate.fingerprint_sha256, "GET shows the attached certificate's fingerprint");
    assert.ok(Date.parse(got.json.not_after) > Date.now(), `the certificate is still valid: not_after ${got.json.not_after}`);
    for (const r of [put, got, await customer.client.get(`/v1/sites/${site.id}`)]) assert.doesNotMatch(JSON.stringify(r.json), /PRIVATE KEY|private_key/, 'no reply shows the private key');

    // on the node: the chain and the key, the key readable by its owner only
    const dir = path.join(panel.root, 'etc/ssl', site.domain);
    assert.equal(fs.statSync(path.join(dir, 'privkey.pem')).mode & 0o777, 0o600, 'the key on the node is readable by its owner only');
    assert.match(fs.readFileSync(path.join(dir, 'fullchain.pem'), 'utf8'), /BEGIN CERTIFICATE/, 'the node holds the certificate chain');
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/nginx/sites', `${site.domain}.conf`), 'utf8'), new RegExp(`listen 127\\.0\\.0\\.1:${panel.webTlsPort} ssl;`), 'the vhost listens on the TLS port');
    // the key is sealed in the site row and gone from the finished operation: no table holds it in clear
    const row = await env.db('panel_sites').where({ id: site.id }).first('tls_key_sealed');
    assert.match(row.tls_key_sealed, /^v1\./, 'the key is sealed in the site row');
    const keyPkcs8 = fs.readFileSync(path.join(dir, 'privkey.pem'), 'utf8');
    assert.deepEqual(await tablesContaining(keyBody(keyPkcs8)), [], "no table holds the node's key in clear");
    assert.deepEqual(await tablesContaining(keyBody(cert.key)), [], 'no table holds the uploaded key in clear');

    // reconciliation: what the panel renders from its record (TLS included) is what the node has on
    // disk; the certificate files themselves are not managed files (the panel cannot rewrite a key)
    const node = panel.runtime.hostingNode!;
    const rendered = node.renderSite(specOf(await env.db('panel_sites').where({ id: site.id }).first()));
    assert.match(rendered.find((f) => f.kind === 'vhost')!.text, /ssl_certificate_key/, 'the rendered vhost names the key file');
    for (const f of rendered) assert.deepEqual(node.readManaged(f.path), { text: f.text }, f.path);
    assert.deepEqual(node.listManaged().filter((f) => f.includes('/etc/ssl/')), [], 'certificate files are not managed files');
  });

  it('a later change of the site (suspend, unsuspend) keeps TLS: the node keeps the key, the operation carries only the certificate', async () => {
    const { site } = await siteWithCertificate({ key: 'rsa2048' });
    const admin = await platformAdmin(panel.url);
    assert.equal((await admin.post(`/v1/sites/${site.id}/suspend`)).status, 200, 'the admin suspends the site');
    await applied(customer.client, site.id);
    assert.equal((await getOverTls(panel.webTlsPort!, site.domain)).status, 503, 'a suspended site answers 503 over TLS');
    assert.equal((await admin.post(`/v1/sites/${site.id}/unsuspend`)).status, 200, 'the admin unsuspends the site');
    const s = await applied(customer.client, site.id);
    assert.equal(s.json.generation, 4, 'attach, suspend and unsuspend make generation 4');
    const https = await getOverTls(panel.webTlsPort!, site.domain);
    assert.equal(https.status, 200, 'HTTPS serves again after the unsuspend');
    const ops = await env.db('panel_node_ops').where({ site_id: site.id, kind: 'site.apply' }).orderBy('created_at').select('payload', 'status');
    assert.equal(ops.length, 4, 'one site.apply per generation');
    assert.ok(ops.every((o: { payload: { site: { tls?: { key?: string } } }; status: string }) => o.status === 'done' && o.payload.site.tls?.key === undefined), 'every site.apply is done and none carries the private key');
    assert.ok(ops.slice(1).every((o: { payload: { site: { tls?: { certificate: string } } } }) => o.payload.site.tls?.certificate.includes('BEGIN CERTIFICATE')), 'every site.apply after the upload carries the certificate');
  });

  it('refuses bad certificates with 400 and changes nothing (site generation, node files, operations)', async () => {
    const site = await newSite();
    const good = makeCertificate({ names: [site.domain] });
    const other = makeCertificate({ names: [site.domain] });
    const cases: Array<[string, { certificate: string; private_key: string }, 'certificate' | 'private_key', RegExp]> = [
      ['garbage certificate', { certificate: 'not a certificate', private_key: good.key }, 'certificate', /no PEM certificate/],
      ['key of another certificate', { certificate: good.certificate, private_key: other.key }, 'private_key', /does not match/],
      ['another domain', (() => { const c = makeCertificate({ names: ['elsewhere.test'] }); return { certificate: c.certificate, private_key: c.key }; })(), 'certificate', /covers none of the site's names .*elsewhere\.test/],
      ['a wildcard one level too deep', (() => { const c = makeCertificate({ names: ['*.test'] }); return { certificate: c.certificate, private_key: c.key }; })(), 'certificate', /covers none/],
      ['expired', (() => { const c = makeCertificate({ names: [site.domain], expired: true }); return { certificate: c.certificate, private_key: c.key }; })(), 'certificate', /expired on 2020-02-01/],
      ['RSA 1024', (() => { const c = makeCertificate({ names: [site.domain], key: 'rsa1024' }); return { certificate: c.certificate, private_key: c.key }; })(), 'private_key', /at least 2048 bits/],
      ['garbage key', { certificate: good.certificate, private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }, 'private_key', /not a PEM private key/],
      ['key in the certificate field', { certificate: good.certificate + good.key, private_key: good.key }, 'certificate', /holds a private key/],
    ];
    const opsBefore = await env.db('panel_node_ops').where({ site_id: site.id }).count<{ n: string }[]>('* as n');
    for (const [what, body, field, why] of cases) {
      const r = await customer.client.put(`/v1/sites/${site.id}/certificate`, body);
      assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, 'validation_failed', what);
      assert.equal(r.json.error.details.field, field, what);
      assert.match(r.json.error.details.detail, why, what);
    }
    const missing = await customer.client.put(`/v1/sites/${site.id}/certificate`, { certificate: good.certificate });
    assert.equal(missing.status, 400, 'a certificate without a key is refused with 400');
    const s = await customer.client.get(`/v1/sites/${site.id}`);
    assert.equal(s.json.generation, 1, "refused certificates leave the site's generation alone");
    assert.deepEqual(await env.db('panel_node_ops').where({ site_id: site.id }).count<{ n: string }[]>('* as n'), opsBefore, 'refused certificates make no node operation');
    assert.equal((await customer.client.get(`/v1/sites/${site.id}/certificate`)).status, 404, 'no certificate is attached after the refusals');
    assert.equal(fs.existsSync(path.join(panel.root, 'etc/ssl', site.domain)), false, 'no certificate files are on the node');
    await refusedTls(panel, site.domain);
    // another account's site is not found, whatever the body
    const stranger = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
    assert.equal((await stranger.client.put(`/v1/sites/${site.id}/certificate`, { certificate: good.certificate, private_key: good.key })).status, 404, 'another account cannot attach to the site');
    assert.equal((await stranger.client.get(`/v1/sites/${site.id}/certificate`)).status, 404, "another account cannot read the site's certificate");
  });

  it('DELETE removes TLS: the handshake for the site is refused, its files are gone, HTTP still serves', async () => {
    const { site } = await siteWithCertificate();
    assert.equal((await getOverTls(panel.webTlsPort!, site.domain)).status, 200, 'the site answers HTTPS before the delete');
    const del = await customer.client.del(`/v1/sites/${site.id}/certificate`);
    assert.equal(del.status, 200, JSON.stringify(del.json));
    await applied(customer.client, site.id);
    await refusedTls(panel, site.domain);
    assert.equal(fs.existsSync(path.join(panel.root, 'etc/ssl', site.domain)), false, 'the certificate files are gone from the node');
    assert.equal((await getFromNode(panel.webPort, site.domain)).status, 200, 'HTTP still serves after the delete');
    assert.equal((await customer.client.get(`/v1/sites/${site.id}/certificate`)).status, 404, 'no certificate is attached after the delete');
    assert.equal((await customer.client.del(`/v1/sites/${site.id}/certificate`)).status, 404, 'a second delete finds nothing');
  });

  it('restore points and deleted-site archives hold the certificate, never the key; a site restored from its archive serves HTTP until attached again', async () => {
    const { site } = await siteWithCertificate();
    const rp = await customer.client.post(`/v1/sites/${site.id}/restore-points`);
    assert.equal(rp.status, 202, JSON.stringify(rp.json));
    let ready: Reply;
    for (ready = rp; ready.json.status === 'pending'; await new Promise((r) => setTimeout(r, 200))) ready = await customer.client.get(`/v1/restore-points/${rp.json.id}`);
    assert.equal(ready.json.status, 'ready', JSON.stringify(ready.json));
    const text = gunzipSync(fs.readFileSync(path.join(panel.root, 'backups', ready.json.file))).toString('latin1');
    assert.match(text, /BEGIN CERTIFICATE/, 'the restore point holds the certificate');
    assert.doesNotMatch(text, /PRIVATE KEY/, 'the restore point never holds the key');

    assert.equal((await customer.client.del(`/v1/sites/${site.id}`)).status, 202, 'the site is deleted');
    for (let r = await customer.client.get(`/v1/sites/${site.id}`); r.status !== 404; r = await customer.client.get(`/v1/sites/${site.id}`)) await new Promise((res) => setTimeout(res, 200));
    assert.equal(fs.existsSync(path.join(panel.root, 'etc/ssl', site.domain)), false, "the deleted site's certificate files are gone");
    const archive = (await (await platformAdmin(panel.url)).get('/v1/site-archives')).json.archives.find((a: { site_id: string }) => a.site_id === site.id);
    assert.doesNotMatch(gunzipSync(fs.readFileSync(path.join(panel.root, 'backups', archive.file))).toString('latin1'), /PRIVATE KEY/, 'the deleted-site archive never holds the key');
    const restored = await (await platformAdmin(panel.url)).post(`/v1/sites/${site.id}/restore`);
    assert.equal(restored.status, 200, JSON.stringify(restored.json));
    assert.equal((await getFromNode(panel.webPort, site.domain)).status, 200, 'the restored site serves HTTP');
    await refusedTls(panel, site.domain);
  });

  it('replacing the certificate serves the new one at once', async () => {
    const { site, put } = await siteWithCertificate();
    const next = makeCertificate({ names: [site.domain], key: 'rsa2048' });
    const again = await customer.client.put(`/v1/sites/${site.id}/certificate`, { certificate: next.certificate, private_key: next.key });
    assert.equal(again.status, 200, JSON.stringify(again.json));
    assert.notEqual(again.json.certificate.fingerprint_sha256, put.json.certificate.fingerprint_sha256, 'the new certificate has another fingerprint');
    await applied(customer.client, site.id);
    assert.equal((await getOverTls(panel.webTlsPort!, site.domain)).fingerprint256, again.json.certificate.fingerprint_sha256, 'the new certificate is served at once');
    assert.equal((await customer.client.get(`/v1/sites/${site.id}/certificate`)).json.key.type, 'rsa', "GET shows the new certificate's RSA key");
  });

  it('a node refuses a certificate whose key it does not have or that does not match, and keeps serving what it served', async () => {
    const node = panel.runtime.hostingNode!;
    assert.equal(node.facts().tls, true, 'the node says it serves TLS');
    const { site } = await siteWithCertificate();
    const row = await env.db('panel_sites').where({ id: site.id }).first();
    const served = (await getOverTls(panel.webTlsPort!, site.domain)).fingerprint256;
    const other = makeCertificate({ names: [site.domain] });
    const spec = { ...specOf(row), generation: row.generation + 1 };
    const noKey = await node.apply({ id: `tls-nokey-${site.id}`, kind: 'site.apply', site: { ...spec, tls: { certificate: other.certificate } } });
    assert.deepEqual(noKey, { ok: false, refused: true, error: 'the private key of this certificate is not on this node: attach the certificate again' }, 'a certificate whose key the node lacks is refused');
    const wrongKey = await node.apply({ id: `tls-wrong-${site.id}`, kind: 'site.apply', site: { ...spec, tls: { certificate: other.certificate, key: makeCertificate({ names: [site.domain] }).key } } });
    assert.equal(!wrongKey.ok && wrongKey.error, 'the private key does not match the certificate', 'a key not matching the certificate is refused');
    const notPem = await node.apply({ id: `tls-bad-${site.id}`, kind: 'site.apply', site: { ...spec, tls: { certificate: 'ssl_certificate /etc/shadow;' } } });
    assert.match(!notPem.ok ? notPem.error : '', /tls\.certificate: a PEM chain/, 'a certificate not in PEM is refused');
    assert.equal((await getOverTls(panel.webTlsPort!, site.domain)).fingerprint256, served, 'the node keeps serving the certificate it served');
  });

  it('wildcards per RFC 6125: *.example covers one whole left-most label only', () => {
    const c = makeCertificate({ names: ['*.shop.test'] });
    const covers = (names: string[]) => {
      const r = checkCertificatePair(c.certificate, c.key, names);
      return r.ok ? r.covers : [];
    };
    assert.deepEqual(covers(['a.shop.test', 'shop.test', 'x.y.shop.test', 'ashop.test']), ['a.shop.test'], '*.shop.test covers one left-most label only');
    assert.deepEqual(covers(['shop.test']), [], '*.shop.test does not cover shop.test');
  });

  it('on a node with an agent: the key goes over the node API in the attaching operation only; the agent node serves HTTPS by SNI', async function () {
    this.timeout(90_000);
    const agentPanel = await startHostingPanel({ flags: ['-node-api-listen', '127.0.0.1:0'], opTimeoutMs: 30_000 });
    const name = unique('tls-agent-');
    const added = await addNode(env.db, null, name);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-tls-agent-'));
    fs.chmodSync(root, 0o755);
    const [webPort, webTlsPort] = [await freePort(), await freePort()];
    const node = await startHostingNode({ root, webPort, webTlsPort, webHost: '127.0.0.1', phpFpm: false, logger: env.logger });
    const agent = startAgent({ node: name, client: createPanelClient({ url: agentPanel.runtime.nodeApiUrl!, token: added.token }), hostingNode: node, logger: env.logger, pollWaitSeconds: 5 });
    try {
      await agent.enrolled;
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', roles: ['web'] });
      const admin = await platformAdmin(agentPanel.url);
      const owner = await createOrgWithLogin((await createOrgWithLogin(admin, { type: 'provider' })).client, { type: 'customer' });
      const domain = `${unique('tlsagent').toLowerCase()}.test`;
      const r = await admin.post(`/v1/orgs/${owner.id}/sites`, { domain, node: name });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      await applied(owner.client, r.json.id);
      const cert = makeCertificate({ names: [domain] });
      const put = await owner.client.put(`/v1/sites/${r.json.id}/certificate`, { certificate: cert.certificate, private_key: cert.key });
      assert.equal(put.status, 200, JSON.stringify(put.json));
      await applied(owner.client, r.json.id);
      assert.equal((await getOverTls(webTlsPort, domain)).fingerprint256, put.json.certificate.fingerprint_sha256, 'the agent node serves the attached certificate by SNI');
      assert.equal(node.facts().tls, true, 'the agent node says it serves TLS');
      const op = await env.db('panel_node_ops').where({ id: put.json.site.operation_id }).first('status', 'payload');
      assert.equal(op.status, 'done', 'the attaching operation is done');
      assert.equal(op.payload.site.tls.key, undefined, "the operation's payload no longer holds the key");
      assert.equal(fs.statSync(path.join(root, 'etc/ssl', domain, 'privkey.pem')).mode & 0o777, 0o600, 'the key on the agent node is readable by its owner only');
      assert.equal((await owner.client.del(`/v1/sites/${r.json.id}`)).status, 202, 'the site on the agent node is deleted');
      for (let g = await owner.client.get(`/v1/sites/${r.json.id}`); g.status !== 404; g = await owner.client.get(`/v1/sites/${r.json.id}`)) await new Promise((res) => setTimeout(res, 200));
      assert.equal(fs.existsSync(path.join(root, 'etc/ssl', domain)), false, 'the certificate files are gone from the agent node');
    } finally {
      await agent.stop();
      await node.stop();
      // out of other suites' placement
      await env.db('panel_nodes').where({ name }).update({ draining: true });
      await agentPanel.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

