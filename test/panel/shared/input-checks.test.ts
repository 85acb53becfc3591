import assert from 'node:assert/strict';
import { PanelClient, platformAdmin, usePanel, type Reply } from '../../helpers/panel';

// Every panel body and query is checked once, before any handler and without recursion (issue 32
// item 12): nesting depth and NUL, which PostgreSQL text cannot hold. Never a 500, signed in or not.

const deep = (n: number, leaf: string) => '{"a":'.repeat(n) + leaf + '}'.repeat(n);
const deepArray = (n: number) => `{"name":${'['.repeat(n)}${']'.repeat(n)}}`;

function refused(r: Reply, field: string, what: string) {
  assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.json)}`);
  assert.equal(r.json?.error?.code, 'validation_failed', `${what}: the code`);
  assert.equal(r.json.error.details.field, field, `${what}: the field`);
}

describe('panel: input checks before any handler', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });

  it('refuses a 5,000-deep JSON body with 400 on sign-in and on a signed-in POST, never 500', async () => {
    const anon = new PanelClient(url());
    refused(await anon.post('/v1/auth/sign-in', deep(5000, '1')), 'body', 'deep object, no sign-in');
    refused(await anon.post('/v1/auth/sign-in', deepArray(5000)), 'body', 'deep array, no sign-in');
    refused(await admin.post('/v1/orgs', deep(5000, '"x"')), 'body', 'deep object, signed in');
    const deepNul = await admin.post('/v1/orgs', deep(5000, '"\\u0000"'));
    refused(deepNul, 'body', 'deep object with a NUL at the bottom');
    assert.match(deepNul.json.error.message, /nest|NUL/, 'the message says what is wrong');
    const r = await admin.post('/v1/orgs', deep(5000, '1'));
    assert.match(r.json.error.message, /deeper than \d+/, 'the message names the depth limit');
    // an ordinary nesting still reaches the handler, which names its own field
    const shallow = await admin.post('/v1/orgs', deep(10, '1'));
    assert.equal(shallow.status, 400, JSON.stringify(shallow.json));
    assert.notEqual(shallow.json.error.details.field, 'body', 'a shallow body reaches the schema');
  });

  it('refuses NUL anywhere in a body or query with 400; an escaped backslash before u0000 is no NUL', async () => {
    const anon = new PanelClient(url());
    const branding = await anon.get('/v1/branding?hostname=%00');
    refused(branding, 'query', 'NUL in the branding query, no sign-in');
    refused(await anon.get('/v1/branding?x%00=1'), 'query', 'NUL in a query name');
    refused(await admin.get('/v1/orgs?q=a%00b'), 'query', 'NUL in a signed-in query');
    refused(await anon.post('/v1/auth/sign-in', { username: 'a\u0000', password: 'x' }), 'body', 'NUL in a value');
    refused(await anon.post('/v1/auth/sign-in', { ['k\u0000']: 1 }), 'body', 'NUL in a key');
    refused(await anon.post('/v1/auth/sign-in', '{"username":"a\\u0000","password":"x"}'), 'body', 'NUL written as an escape');
    // "\\u0000" is a backslash followed by u0000: ordinary text, a wrong sign-in (401), not a refused body
    const text = await anon.post('/v1/auth/sign-in', '{"username":"a\\\\u0000","password":"wrong password"}');
    assert.equal(text.status, 401, `an escaped backslash is text: ${JSON.stringify(text.json)}`);
    const ok = await anon.get('/v1/branding?hostname=panel.example.com');
    assert.equal(ok.status, 200, `an ordinary query passes: ${JSON.stringify(ok.json)}`);
  });
});
