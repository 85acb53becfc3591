import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { startGatewayApi, type GatewayRuntime } from '../../main/gateway';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { call, newAccount } from '../helpers/stack';
import { newProject } from '../helpers/testruns';
import { env } from '../setup/env';
import { until } from '../helpers/until';

// Operators see refusals (issue 29 item 5): every 4xx answer of the gateway port is one info line
// with the request id, method, path, status, code, param and who sent it (never the key or the
// body), at most N lines per client per window and then one "suppressed" line; GET and HEAD /
// describe the service instead of answering 404. Both variants, over real HTTP, logs captured.

type Line = Record<string, unknown> & { msg: string; level: number };

const WINDOW_MS = 1500;
const PER_WINDOW = 3;
const INFO = 30;

/** A gateway of the variant whose log lines (info and up) land in `lines`. */
async function gatewayWithLog(variant: 'credits' | 'keyed'): Promise<{ gw: GatewayRuntime; lines: Line[]; raw: string[] }> {
  const lines: Line[] = [];
  const raw: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const text of String(chunk).split('\n').filter(Boolean)) {
        raw.push(text);
        lines.push(JSON.parse(text) as Line);
      }
      done();
    },
  });
  const gw = await startGatewayApi({
    db: env.db,
    databaseUrl: env.databaseUrl,
    temporalAddress: env.temporalAddress,
    namespace: 'default',
    logger: pino({ level: 'info' }, sink),
    port: 0,
    upstreamTimeoutMs: 10_000,
    keyCacheTtlMs: 60_000,
    variant,
    refusalLog: { linesPerWindow: PER_WINDOW, windowMs: WINDOW_MS },
  });
  return { gw, lines, raw };
}

const refusals = (lines: Line[]) => lines.filter((l) => l.msg === 'request refused');

const SECRET_IN_BODY = `body-secret-${randomUUID()}`;
const unknownModel = { model: `no-such-model-${randomUUID().slice(0, 8)}`, messages: [{ role: 'user', content: SECRET_IN_BODY }] };

describe('refusals are logged at info, rate-limited per client; GET and HEAD / describe the service', function () {
  this.timeout(60_000);

  describe('credits variant', () => {
    let gw: GatewayRuntime;
    let lines: Line[];
    let raw: string[];
    before(async () => {
      ({ gw, lines, raw } = await gatewayWithLog('credits'));
    });
    after(async () => {
      await gw?.close();
    });

    it('a 4xx is one info line with request id, method, path, status, code, param and key id; never the key or the body', async () => {
      const acct = await newAccount();
      const r = await call(gw.url, '/v1/chat/completions', { key: acct.key, body: unknownModel });
      assert.equal(r.status, 403, `an unknown model is refused: ${r.text}`);
      const requestId = r.headers.get('x-request-id');
      const mine = refusals(lines).filter((l) => l.request_id === requestId);
      assert.equal(mine.length, 1, `one line for the refused request: ${JSON.stringify(lines)}`);
      const line = mine[0];
      assert.equal(line.level, INFO, 'logged at info');
      assert.deepEqual(
        { method: line.method, path: line.path, status: line.status, code: line.code, param: line.param, key_id: line.key_id },
        { method: 'POST', path: '/v1/chat/completions', status: 403, code: 'model_not_found', param: 'model', key_id: acct.keyId },
        'the line carries what an operator needs',
      );
      const text = raw.join('\n');
      assert.ok(!text.includes(acct.key), 'the key is never logged');
      assert.ok(!text.includes(SECRET_IN_BODY), 'the body is never logged');
    });

    it('unauthenticated refusals name the client address, never the presented key; the test-run API names its CI project', async () => {
      const wrongKey = `gw_ai_${randomUUID().replace(/-/g, '')}`;
      const r = await call(gw.url, '/v1/models', { key: wrongKey });
      assert.equal(r.status, 401, `an unknown key is refused: ${r.text}`);
      const line = refusals(lines).find((l) => l.request_id === r.headers.get('x-request-id'));
      assert.ok(line, 'the 401 is logged');
      assert.equal(line.code, 'invalid_api_key', 'its code');
      assert.equal(line.key_id, undefined, 'no key id: the key was not recognised');
      assert.match(String(line.client_ip), /127\.0\.0\.1/, 'the client address instead');
      assert.ok(!raw.join('\n').includes(wrongKey), 'the presented key is never logged');

      const p = await newProject({ taskQueue: `refusal-${randomUUID()}` });
      const other = await call(gw.url, `/api/projects/${randomUUID()}/cases`, { headers: { authorization: `Bearer ${p.token}` } });
      assert.equal(other.status, 404, `another project is not found: ${other.text}`);
      const apiLine = refusals(lines).find((l) => l.request_id === other.headers.get('x-request-id'));
      assert.ok(apiLine, 'the test-run API refusal is logged');
      assert.equal(apiLine.project_id, p.id, 'who: the CI token project');
      assert.equal(apiLine.code, 'not_found', 'its code');
      assert.equal(apiLine.param, 'id', 'its param');
      assert.ok(!raw.join('\n').includes(p.token), 'the CI token is never logged');
    });

    it('at most N lines per key per window, then one line with the number suppressed; other clients keep their own budget', async () => {
      const noisy = await newAccount();
      const quiet = await newAccount();
      const sent = PER_WINDOW + 4;
      for (let i = 0; i < sent; i++) {
        const r = await call(gw.url, '/v1/chat/completions', { key: noisy.key, body: unknownModel });
        assert.equal(r.status, 403, `refusal ${i}: ${r.text}`);
      }
      const q = await call(gw.url, '/v1/chat/completions', { key: quiet.key, body: unknownModel });
      assert.equal(q.status, 403, `the other key is refused too: ${q.text}`);
      assert.equal(refusals(lines).filter((l) => l.key_id === noisy.keyId).length, PER_WINDOW, 'the noisy key is logged N times');
      assert.equal(refusals(lines).filter((l) => l.key_id === quiet.keyId).length, 1, 'the other key still gets its line');

      const summary = await until('the suppressed line', () => lines.find((l) => l.key_id === noisy.keyId && l.suppressed !== undefined), WINDOW_MS + 5000);
      assert.equal(summary.suppressed, sent - PER_WINDOW, 'it counts the lines left out');
      assert.equal(summary.level, INFO, 'at info');
      assert.match(summary.msg, new RegExp(`suppressed ${sent - PER_WINDOW} lines`), 'the message says how many');
      assert.ok(!lines.some((l) => l.key_id === quiet.keyId && l.suppressed !== undefined), 'nothing was suppressed for the other key');

      // A new window: the key is logged again.
      const again = await call(gw.url, '/v1/chat/completions', { key: noisy.key, body: unknownModel });
      assert.equal(again.status, 403, `refused again: ${again.text}`);
      assert.ok(refusals(lines).some((l) => l.request_id === again.headers.get('x-request-id')), 'logged in the next window');
    });

    it('GET / and HEAD / answer 200 with the service description (HEAD without a body), no key, nothing logged as refused', async () => {
      const before = refusals(lines).length;
      const get = await call(gw.url, '/');
      assert.equal(get.status, 200, `GET /: ${get.text}`);
      assert.deepEqual(
        get.json,
        { name: 'durable-gateway', variant: 'credits', version: get.json?.version, links: { models: '/v1/models', openapi: '/openapi.json', docs: '/docs', health: '/healthz' } },
        'name, variant and links',
      );
      assert.match(String(get.json.version), /^\d+\.\d+\.\d+/, 'a version');
      const head = await call(gw.url, '/', { method: 'HEAD' });
      assert.equal(head.status, 200, 'HEAD / is 200');
      assert.equal(head.text, '', 'HEAD has no body');
      assert.match(head.headers.get('content-type') ?? '', /application\/json/, 'HEAD has the headers of GET');
      assert.equal(refusals(lines).length, before, 'no refusal logged for them');
    });
  });

  describe('keyed variant', () => {
    let gw: GatewayRuntime;
    let lines: Line[];
    let raw: string[];
    before(async () => {
      ({ gw, lines, raw } = await gatewayWithLog('keyed'));
    });
    after(async () => {
      await gw?.close();
    });

    it('a refused request of an mt- key is logged with its key id; a wrong key with the client address only', async () => {
      const a = await createAccount(env.db, { name: `refusals-${randomUUID()}`, tier: 'pro', credits: '10' });
      const k = await createKey(env.db, { accountId: a.id, label: 'refusal log', format: 'mt' });
      const r = await call(gw.url, '/v1/chat/completions', { key: k.key, body: unknownModel });
      assert.equal(r.status, 403, `an unknown model is refused: ${r.text}`);
      const line = refusals(lines).find((l) => l.request_id === r.headers.get('x-request-id'));
      assert.ok(line, `the refusal is logged: ${JSON.stringify(lines)}`);
      assert.deepEqual({ status: line.status, code: line.code, param: line.param, key_id: line.key_id }, { status: 403, code: 'model_not_found', param: 'model', key_id: k.id }, 'its fields');

      const wrong = `mt-${'A'.repeat(43)}`;
      const w = await call(gw.url, '/v1/models', { key: wrong });
      assert.equal(w.status, 401, `a wrong key is refused: ${w.text}`);
      const wl = refusals(lines).find((l) => l.request_id === w.headers.get('x-request-id'));
      assert.ok(wl, 'the 401 is logged');
      assert.equal(wl.key_id, undefined, 'no key id');
      assert.ok(wl.client_ip, 'the client address');
      const text = raw.join('\n');
      assert.ok(!text.includes(k.key) && !text.includes(wrong), 'no key is ever logged');

      const head = await call(gw.url, '/', { method: 'HEAD' });
      assert.equal(head.status, 200, 'HEAD / is 200 in the keyed variant too (no key asked outside /v1)');
      const get = await call(gw.url, '/');
      assert.equal(get.json?.variant, 'keyed', 'the description names the variant');
    });
  });
});
