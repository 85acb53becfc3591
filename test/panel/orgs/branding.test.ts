import assert from 'node:assert/strict';
import { createOrgWithLogin, platformAdmin, PanelClient, unique, usePanel, type Reply } from '../../helpers/panel';

// Branding (spec 2 section 2.7): set on an org holding set_branding, by itself or above; empty
// fields inherit from the nearest level above; the sign-in page reads it without signing in.

function assertRefused(r: Reply, status: number, code: string, field?: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, `the refusal's error code: ${JSON.stringify(r.json)}`);
  if (field) assert.equal(r.json.error.details.field, field, `the refusal names the field: ${JSON.stringify(r.json)}`);
}

const host = () => `${unique('panel-')}.example.com`;

describe('panel: branding', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });

  it('sets branding on the own org or one below holding set_branding; empty fields inherit from the nearest level above', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['set_branding'] });
    const plain = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const hostname = host();
    const set = await provider.client.put(`/v1/orgs/${provider.id}/branding`, {
      display_name: ' Provider Hosting ',
      accent_color: '#AABBCC',
      support_email: 'help@provider.example.com',
      login_hostname: hostname.toUpperCase(),
    });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.deepEqual(set.json.own, { display_name: 'Provider Hosting', accent_color: '#aabbcc', support_email: 'help@provider.example.com', login_hostname: hostname }, 'the provider\'s own branding is stored trimmed, the colour and hostname lower-cased');

    const own = await reseller.client.put(`/v1/orgs/${reseller.id}/branding`, { display_name: 'Reseller Web' });
    assert.equal(own.status, 200, JSON.stringify(own.json));
    const read = await customer.client.get(`/v1/orgs/${customer.id}/branding`);
    assert.equal(read.status, 200, `the customer reads its branding: ${JSON.stringify(read.json)}`);
    assert.deepEqual(read.json.own, { display_name: null, accent_color: null, support_email: null, login_hostname: null }, 'the customer has no branding of its own');
    assert.deepEqual(read.json.effective, { display_name: 'Reseller Web', accent_color: '#aabbcc', support_email: 'help@provider.example.com', login_hostname: hostname }, 'each empty field of the customer inherits from the nearest level above (reseller name, provider\'s others)');

    // from above, too; null clears (the level above shows through again); absent fields are kept
    assert.equal((await provider.client.put(`/v1/orgs/${reseller.id}/branding`, { support_email: 'web@reseller.example.com' })).status, 200, 'the provider may set branding on a reseller below it');
    const cleared = await reseller.client.put(`/v1/orgs/${reseller.id}/branding`, { display_name: null });
    assert.deepEqual(cleared.json.own, { display_name: null, accent_color: null, support_email: 'web@reseller.example.com', login_hostname: null }, 'null clears the display name; the support email set from above is kept');
    assert.equal(cleared.json.effective.display_name, 'Provider Hosting', 'with the reseller\'s name cleared the provider\'s shows through again');
    const entry = (await provider.client.get(`/v1/orgs/${reseller.id}/audit`)).json.entries.find((e: { action: string }) => e.action === 'org.set_branding');
    assert.deepEqual([entry.before.display_name, entry.after.display_name], ['Reseller Web', null], 'the audit entry records the display name before and after');

    // customers never hold set_branding; nor does a reseller not granted it; outside the subtree 404
    assertRefused(await customer.client.put(`/v1/orgs/${customer.id}/branding`, { display_name: 'Mine' }), 403, 'power_missing');
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/branding`, { display_name: 'Theirs' }), 403, 'power_missing');
    const missing = await plain.client.put(`/v1/orgs/${plain.id}/branding`, { display_name: 'Mine' });
    assertRefused(missing, 403, 'power_missing');
    assert.equal(missing.json.error.details.power, 'set_branding', 'the refusal names the missing power');
    assertRefused(await reseller.client.put(`/v1/orgs/${provider.id}/branding`, { display_name: 'Up' }), 404, 'not_found');
    assertRefused(await reseller.client.get(`/v1/orgs/${plain.id}/branding`), 404, 'not_found');
    assertRefused(await customer.client.get(`/v1/orgs/not-a-uuid/branding`), 404, 'not_found');
  });

  it('refuses bad fields with 400 naming the field and changes nothing', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const path = `/v1/orgs/${provider.id}/branding`;
    const before = { display_name: 'Kept', accent_color: '#010203', support_email: 'kept@example.com', login_hostname: host() };
    assert.equal((await provider.client.put(path, before)).status, 200, 'the branding to keep is set');
    const bad: Array<[unknown, string]> = [
      [{ display_name: '' }, 'display_name'],
      [{ display_name: 'x'.repeat(81) }, 'display_name'],
      [{ display_name: 5 }, 'display_name'],
      [{ accent_color: 'red' }, 'accent_color'],
      [{ accent_color: '#abc' }, 'accent_color'],
      [{ accent_color: '#gggggg' }, 'accent_color'],
      [{ support_email: 'not-an-email' }, 'support_email'],
      [{ support_email: 'a@b@c.example' }, 'support_email'],
      [{ login_hostname: 'not a host' }, 'login_hostname'],
      [{ login_hostname: '-bad.example.com' }, 'login_hostname'],
      [{ login_hostname: 'a..example.com' }, 'login_hostname'],
      [{ login_hostname: 'panel_1.example.com' }, 'login_hostname'],
      [{ login_hostname: '10.0.0.1' }, 'login_hostname'],
      [{ login_hostname: `${'x'.repeat(64)}.example.com` }, 'login_hostname'],
      [{ login_hostname: 'https://panel.example.com' }, 'login_hostname'],
      [{ logo: 'x.png' }, 'logo'],
      [{ display_name: 'Fine', accent_color: 'blue' }, 'accent_color'],
    ];
    for (const [body, field] of bad) assertRefused(await provider.client.put(path, body), 400, 'validation_failed', field);
    assert.deepEqual((await provider.client.get(path)).json.own, before, 'no refused change altered the branding');
  });

  it('a login hostname is unique across orgs (409 conflict)', async () => {
    const [a, b] = [await createOrgWithLogin(admin, { type: 'provider' }), await createOrgWithLogin(admin, { type: 'provider' })];
    const hostname = host();
    assert.equal((await a.client.put(`/v1/orgs/${a.id}/branding`, { login_hostname: hostname })).status, 200, 'the hostname is set on the first org');
    assertRefused(await b.client.put(`/v1/orgs/${b.id}/branding`, { login_hostname: hostname.toUpperCase(), display_name: 'B' }), 409, 'conflict', 'login_hostname');
    assert.equal((await b.client.get(`/v1/orgs/${b.id}/branding`)).json.own.display_name, null, 'nothing of the refused change is kept');
    assert.equal((await a.client.put(`/v1/orgs/${a.id}/branding`, { login_hostname: hostname })).status, 200, 'its own hostname again is fine');
    await a.client.put(`/v1/orgs/${a.id}/branding`, { login_hostname: null });
    assert.equal((await b.client.put(`/v1/orgs/${b.id}/branding`, { login_hostname: hostname })).status, 200, 'free once cleared');
  });

  it('GET /v1/branding answers without sign-in with the four fields of the hostname’s org, else the platform’s', async () => {
    const platformId = (await admin.get('/v1/account')).json.org_id;
    const platform = await admin.put(`/v1/orgs/${platformId}/branding`, { display_name: 'Hosting Platform', accent_color: '#112233' });
    assert.equal(platform.status, 200, JSON.stringify(platform.json));
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['set_branding'] });
    const [providerHost, resellerHost] = [host(), host()];
    await provider.client.put(`/v1/orgs/${provider.id}/branding`, { display_name: 'Provider', support_email: 'help@provider.example.com', login_hostname: providerHost });
    await reseller.client.put(`/v1/orgs/${reseller.id}/branding`, { display_name: 'Reseller', login_hostname: resellerHost });

    const anonymous = new PanelClient(url());
    assertRefused(await anonymous.get('/v1/orgs'), 401, 'unauthenticated');
    const branded = await anonymous.get(`/v1/branding?hostname=${resellerHost.toUpperCase()}`);
    assert.equal(branded.status, 200, `the anonymous branding page answers: ${JSON.stringify(branded.json)}`);
    assert.deepEqual(branded.json, { display_name: 'Reseller', accent_color: '#112233', support_email: 'help@provider.example.com', login_hostname: resellerHost }, 'the reseller\'s hostname shows its branding, the rest inherited from the platform and provider');
    assert.equal((await anonymous.get(`/v1/branding?hostname=${providerHost}`)).json.display_name, 'Provider', 'the provider\'s hostname shows the provider\'s name');

    const platformBranding = (await admin.get(`/v1/orgs/${platformId}/branding`)).json.effective;
    assert.deepEqual((await anonymous.get('/v1/branding?hostname=unknown.example.com')).json, platformBranding, 'an unknown hostname shows the platform\'s branding');
    assert.deepEqual((await anonymous.get('/v1/branding')).json, platformBranding, 'no hostname shows the platform\'s branding');
    assert.equal(platformBranding.display_name, 'Hosting Platform', 'the platform\'s branding is the one set above');
    assertRefused(await anonymous.get('/v1/branding?org=1'), 400, 'validation_failed', 'org');
    assert.equal(anonymous.cookie, null, 'no session is handed out');
  });
});
