import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_IMPORT_LIMITS } from '../../../domain/panel/import-archive';
import { readArchive } from '../../../services/panel/imports/reader';
import { getOverTls, makeCertificate, type CertificateOptions } from '../../helpers/certificates';
import { settledImport, uploadArchive } from '../../helpers/imports';
import { writeAccountArchive, type RawEntry } from '../../helpers/legacy-archive';
import { createOrgWithLogin, platformAdmin, startHostingPanel, tablesContaining, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';

// The legacy import's certificates step (spec 2 section 4.4.4: after websites, before databases):
// the dry run pairs each certificate of the archive with its key and the website it covers and says
// why the others are not migrated; the run attaches them, and the imported site answers HTTPS with
// the archive's certificate through the node's nginx.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-import-tls-'));
const uploads = path.join(dir, 'uploads');

type Item = { kind: string; name: string; class: string; note?: string };

const pem = (names: string[], o: Omit<CertificateOptions, 'names'> = {}) => makeCertificate({ names, ...o });

describe('panel: legacy import of TLS certificates (dry run classes, certificates step, HTTPS afterwards)', function () {
  this.timeout(180_000);
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('dry run: migrated when key and website match; not migrated with the reason otherwise', async () => {
    const domain = 'carol-shop.test';
    const expired = pem([domain], { expired: true });
    const lonely = pem([`addon-${domain}`]);
    const elsewhere = pem(['elsewhere.test']);
    const weak = pem([`addon-${domain}`], { key: 'rsa1024' });
    const mismatchA = pem([`addon-${domain}`]);
    const mismatchB = pem([`addon-${domain}`]);
    const stray = pem(['stray.test']);
    const extra: RawEntry[] = [
      { path: `sslcerts/old-${domain}.crt`, body: expired.certificate },
      { path: `sslkeys/old-${domain}.key`, body: expired.key, mode: 0o600 },
      { path: `sslcerts/lonely-${domain}.crt`, body: lonely.certificate },
      { path: 'sslcerts/elsewhere.test.crt', body: elsewhere.certificate },
      { path: 'sslkeys/elsewhere.test.key', body: elsewhere.key, mode: 0o600 },
      { path: `sslcerts/weak-${domain}.crt`, body: weak.certificate },
      { path: `sslkeys/weak-${domain}.key`, body: weak.key, mode: 0o600 },
      { path: `apache_tls/mismatch-${domain}`, body: mismatchA.key + mismatchB.certificate, mode: 0o600 },
      { path: 'sslkeys/stray.key', body: stray.key, mode: 0o600 },
    ];
    const file = await writeAccountArchive(path.join(dir, 'cpmove-carol.tar.gz'), { user: 'carol', domain, extra });
    const report = await readArchive(file, { limits: DEFAULT_IMPORT_LIMITS, phpVersions: ['8.2'] });
    const note = (name: string, kind = 'certificate') => {
      const i = (report.items as Item[]).find((x) => x.kind === kind && x.name === name);
      assert.ok(i, `${kind} ${name} in ${JSON.stringify(report.items.filter((x) => /certificate|tls/.test(x.kind)))}`);
      return `${i.class}: ${i.note}`;
    };
    assert.match(note(domain), /^migrated: attached to the website carol-shop\.test .*valid until/, 'the matching key and certificate are migrated onto the website, with the expiry date');
    assert.match(note(`old-${domain}`), /^not_migrated: expired on 2020-02-01/, 'an expired certificate is not migrated, with its expiry date');
    assert.match(note(`lonely-${domain}`), /^not_migrated: no private key in sslkeys\/ matches it/, 'a certificate without a matching key is not migrated');
    assert.match(note('elsewhere.test'), /^not_migrated: covers no imported website \(it is for elsewhere\.test\)/, 'a certificate for no imported website is not migrated');
    assert.match(note(`weak-${domain}`), /^not_migrated: an RSA key of at least 2048 bits/, 'a weak RSA key is refused with the 2048-bit minimum');
    assert.match(note(`mismatch-${domain}`), /^not_migrated: apache_tls\/mismatch-carol-shop\.test holds no private key that matches its certificate/, 'a combined file whose key does not match its certificate is not migrated');
    assert.match(note('stray', 'tls_key'), /^not_migrated: no certificate in the archive matches this private key/, 'a key without a certificate is not migrated');
    // the plan names archive paths, never a key
    assert.equal(report.plan.certificates!.length, 1, 'only the one good certificate is planned');
    assert.deepEqual({ ...report.plan.certificates![0], fingerprint_sha256: undefined, not_after: undefined }, { site: domain, certificate: `sslcerts/${domain}.crt`, key: `sslkeys/${domain}.key`, fingerprint_sha256: undefined, not_after: undefined }, 'the plan names the archive paths of the certificate and its key');
    assert.doesNotMatch(JSON.stringify(report), /PRIVATE KEY/, 'the dry-run report never contains a private key');
  });

  describe('import run into a panel whose node serves TLS', () => {
    let panel: HostingPanel;
    let provider: { id: string; client: PanelClient };
    before(async function () {
      this.timeout(120_000);
      panel = await startHostingPanel({ tls: true, opTimeoutMs: 30_000, imports: { dir: uploads, limits: { maxRatio: 1000 } } });
      provider = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
    });
    after(async () => {
      await panel?.close();
    });

    it('attaches the archive certificate to its website: HTTPS serves the imported files with it; the key is in no table in clear', async () => {
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const user = unique('tls').toLowerCase();
      const domain = `${user}.test`;
      const file = await writeAccountArchive(path.join(dir, `cpmove-${user}.tar.gz`), { user, domain, without: ['mysql'] });
      const up = await uploadArchive(provider.client, customer.id, file);
      assert.equal(up.status, 201, JSON.stringify(up.json));
      assert.deepEqual(up.json.items.map((i: { step: string }) => i.step), ['dns_zones', 'dns_zones', 'websites', 'websites', 'websites', 'certificates', 'site_files', 'site_files', 'site_files'], 'the import items, certificates step included');
      const step = up.json.progress.steps.map((s: { step: string }) => s.step);
      assert.deepEqual(step.slice(0, 4), ['dns_zones', 'websites', 'certificates', 'databases'], 'the run steps order: zones, websites, certificates, databases');
      assert.equal(up.json.report.items.find((i: Item) => i.kind === 'certificate' && i.name === domain).class, 'migrated', 'the archive certificate is classed migrated');

      assert.equal((await provider.client.post(`/v1/imports/${up.json.id}/run`)).status, 202, 'the import run is accepted');
      const done = await settledImport(provider.client, up.json.id);
      assert.equal(done.json.status, 'done', JSON.stringify(done.json.items.filter((i: { error: string | null }) => i.error)));
      const item = done.json.items.find((i: { step: string }) => i.step === 'certificates');
      assert.equal(item.state, 'done', 'the certificates step is done');
      assert.equal(item.detail.not_migrated, undefined, 'no certificate was left not migrated');

      // the archive's own certificate, served by SNI for the domain and its www alias, over the imported files
      const archived = new X509Certificate((await readCertificateFrom(file, `sslcerts/${domain}.crt`))!);
      const https = await getOverTls(panel.webTlsPort!, domain);
      assert.equal(https.status, 200, 'HTTPS answers for the imported domain');
      assert.match(https.body, new RegExp(`Imported ${domain.replace(/\./g, '\\.')}`), 'HTTPS serves the imported files');
      assert.equal(https.fingerprint256, archived.fingerprint256, "HTTPS serves the archive's own certificate for the domain");
      assert.equal((await getOverTls(panel.webTlsPort!, `www.${domain}`)).fingerprint256, archived.fingerprint256, 'the www alias is served with the same archive certificate');
      const site = (await provider.client.get(`/v1/orgs/${customer.id}/sites`)).json.sites.find((s: { domain: string }) => s.domain === domain);
      const got = await provider.client.get(`/v1/sites/${site.id}/certificate`);
      assert.equal(got.status, 200, "the site's certificate is readable through the API");
      assert.equal(got.json.fingerprint_sha256, archived.fingerprint256, "the API shows the archive certificate's fingerprint");
      const key = fs.readFileSync(path.join(panel.root, 'etc/ssl', domain, 'privkey.pem'), 'utf8');
      assert.deepEqual(await tablesContaining(key.split('\n')[1]), [], 'the private key is in no database table in clear');
    });
  });
});

/** One file's text from a generated archive (the test's own reading, independent of the panel's reader). */
async function readCertificateFrom(file: string, rel: string): Promise<string | null> {
  const { list } = await import('tar');
  let text: string | null = null;
  await list({
    file,
    onReadEntry: (e) => {
      if (e.path.endsWith(`/${rel}`)) {
        const chunks: Buffer[] = [];
        e.on('data', (c: Buffer) => chunks.push(c));
        e.on('end', () => (text = Buffer.concat(chunks).toString('utf8')));
      } else e.resume();
    },
  });
  return text;
}
