import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { isPublicAddress } from '../../services/shared/webhook-targets';
import { readMultipart, MultipartError } from '../../api/gateway/media/images/multipart';
import { fetchImageUrl, UrlFetchRefused } from '../../api/gateway/media/images/url-fetch';
import { normalize } from '../../domain/credits/pricing';
import { imageBytes } from '../../simulator/media-bytes';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Images (spec 1 sections 2.6, 2.8, 4.1, 4.2, 4.9, 6.1): parameter rules, edits uploads, streamed
// previews, idempotency, billing of what was received, and the guard on fetched image URLs.

const PNG = imageBytes('png', { r: 10, g: 20, b: 30, a: 255 });
const JPEG = imageBytes('jpeg', { r: 200, g: 20, b: 30, a: 255 });
const WEBP = imageBytes('webp', { r: 1, g: 200, b: 30, a: 255 });
const dataUrl = (b: Buffer, type = 'image/png') => `data:${type};base64,${b.toString('base64')}`;

interface FormPart {
  name: string;
  value: string | Buffer;
  filename?: string;
  type?: string;
}

function form(parts: FormPart[], boundary = `b-${randomUUID()}`): { body: Buffer; type: string } {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disp = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disp}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`));
    chunks.push(typeof p.value === 'string' ? Buffer.from(p.value) : p.value);
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

async function postForm(base: string, key: string, f: { body: Buffer; type: string }, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': f.type, ...headers }, body: f.body });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Server-sent events of a streamed answer: [event name, parsed data] and the raw [DONE]. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function sseFrames(text: string): Array<{ event: string | null; data: any }> {
  return text
    .split('\n\n')
    .filter((f) => f.trim())
    .map((f) => {
      const event = /^event: (.*)$/m.exec(f)?.[1] ?? null;
      const data = /^data: (.*)$/m.exec(f)?.[1] ?? '';
      return { event, data: data === '[DONE]' ? '[DONE]' : JSON.parse(data) };
    });
}

const isPng = (b64: string) => Buffer.from(b64, 'base64').subarray(0, 8).equals(PNG.subarray(0, 8));

async function balance(a: TestAccount): Promise<string> {
  const row = await env.db('accounts').where({ id: a.accountId }).first();
  return normalize(row.total_usage);
}

async function reservationsOf(a: TestAccount) {
  return env.db('reservations').where({ account_id: a.accountId }).orderBy('created_at');
}

/** DESIGN.md section 3: the account row agrees with the ledger and the reservations, nothing left held. */
async function assertInvariants(a: TestAccount) {
  const inv = await checkInvariants(a.accountId);
  assert.equal(normalize(inv.account.total_usage), normalize(inv.ledger.usage), 'total_usage equals the ledger');
  assert.equal(normalize(inv.account.reserved_credits), normalize(inv.reservations.reserved), 'reserved equals open holds');
  assert.equal(inv.account.pending_requests, inv.reservations.pending, 'pending_requests equals the open reservations');
  assert.equal(normalize(inv.account.total_usage), normalize(inv.reservations.charged), 'usage is the sum of charges once settled');
  assert.equal(inv.reservations.pending, 0, 'no reservation is left pending');
}

async function generation(base: string, key: string, id: string) {
  await settled(id);
  const g = await call(base, `/v1/generation?id=${id}`, { key });
  assert.equal(g.status, 200, `the generation record answers: ${g.text.slice(0, 300)}`);
  return g.json.data;
}

describe('images: address guard (pure)', () => {
  const refused = [
    '127.0.0.1', '127.255.255.254', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1',
    '169.254.169.254', '169.254.0.1', '100.64.0.1', '100.100.100.200', '0.0.0.0', '0.1.2.3', '224.0.0.1', '239.255.255.250',
    '240.0.0.1', '255.255.255.255', '192.0.2.1', '198.18.0.1', '198.51.100.7', '203.0.113.9', '192.0.0.8',
    '::1', '::', 'fe80::1', 'fe80::1%eth0', 'fc00::1', 'fd00:ec2::254', 'ff02::1', '2001:db8::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:a9fe:a9fe', '::127.0.0.1', '64:ff9b::127.0.0.1', '64:ff9b::a9fe:a9fe',
    '[::1]', 'localhost', 'example.com', '', '1.2.3', '256.1.1.1', '0x7f.0.0.1', '2130706433', '017700000001',
    // issue 33 item 6: the IPv6 forms this guard let through (IPv4-compatible in hex, 6to4, Teredo's obfuscated client)
    '::7f00:1', '2002:7f00:1::', '2002:a9fe:a9fe::', '2001:0:4136:e378:8000:63bf:80ff:fffe',
  ];
  const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '172.15.255.255', '100.128.0.1', '192.169.0.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8', '64:ff9b::808:808'];
  for (const ip of refused) it(`refuses ${JSON.stringify(ip)}`, () => assert.equal(isPublicAddress(ip), false, `${ip} is not a public address`));
  for (const ip of allowed) it(`allows ${ip}`, () => assert.equal(isPublicAddress(ip), true, `${ip} is a public address`));
});

describe('images: image URL fetching', () => {
  // 127.0.0.2 stands in for a public host: the policy allows only it. Every other address
  // goes through the real rules.
  const standIn = (ip: string) => ip === '127.0.0.2' || isPublicAddress(ip);
  let hits: string[];
  let loopback: http.Server;
  let loopPort: number;
  let standInServer: http.Server;
  let standPort: number;
  before(async () => {
    hits = [];
    const serve = (host: string) => (req: http.IncomingMessage, res: http.ServerResponse) => {
      hits.push(`${host}${req.url}`);
      if (req.url === '/png') return res.end(PNG);
      if (req.url === '/text') return res.end('hello');
      if (req.url === '/big') return res.end(Buffer.concat([PNG, Buffer.alloc(4096)]));
      if (req.url === '/hang') return; // never answers
      if (req.url?.startsWith('/to?')) {
        res.writeHead(302, { location: decodeURIComponent(req.url.slice(4)) });
        return res.end();
      }
      res.writeHead(404).end();
    };
    loopback = http.createServer(serve('loop'));
    standInServer = http.createServer(serve('stand'));
    await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => standInServer.listen(0, '127.0.0.2', r));
    loopPort = (loopback.address() as AddressInfo).port;
    standPort = (standInServer.address() as AddressInfo).port;
  });
  after(() => {
    loopback.closeAllConnections();
    standInServer.closeAllConnections();
    loopback.close();
    standInServer.close();
  });
  beforeEach(() => (hits = []));

  const refusedWith = async (url: string, pattern: RegExp, policy = { allowAddress: standIn }) => {
    await assert.rejects(fetchImageUrl(url, policy), (e: unknown) => e instanceof UrlFetchRefused && pattern.test(e.message));
  };

  it('fetches a PNG from an allowed address (control)', async () => {
    const r = await fetchImageUrl(`http://127.0.0.2:${standPort}/png`, { allowAddress: standIn });
    assert.equal(r.kind, 'png', 'the fetched image is judged a PNG');
    assert.ok(r.data.equals(PNG), `the fetched bytes are the PNG: ${r.data.length} bytes`);
  });
  it('refuses loopback, private, link-local and metadata literals without connecting', async () => {
    for (const host of ['127.0.0.1', '10.0.0.1', '192.168.0.10', '169.254.169.254', '[::1]', '[::ffff:127.0.0.1]']) {
      await refusedWith(`http://${host}:${loopPort}/png`, /not a public address/);
    }
    assert.deepEqual(hits, [], `no server was reached: ${hits.join(', ')}`);
  });
  it('refuses a DNS name that resolves to loopback (localhost)', async () => {
    await refusedWith(`http://localhost:${loopPort}/png`, /non-public address/);
    assert.deepEqual(hits, [], `no server was reached: ${hits.join(', ')}`);
  });
  it('refuses a redirect from an allowed host to loopback, by literal or by name', async () => {
    await refusedWith(`http://127.0.0.2:${standPort}/to?${encodeURIComponent(`http://127.0.0.1:${loopPort}/png`)}`, /not a public address/);
    await refusedWith(`http://127.0.0.2:${standPort}/to?${encodeURIComponent(`http://localhost:${loopPort}/png`)}`, /non-public address/);
    assert.ok(hits.every((h) => h.startsWith('stand')), `loopback server was reached: ${hits.join(', ')}`);
    assert.equal(hits.length, 2, `only the two redirecting requests reached the stand-in: ${hits.join(', ')}`);
  });
  it('follows an allowed redirect, but not endlessly', async () => {
    const r = await fetchImageUrl(`http://127.0.0.2:${standPort}/to?${encodeURIComponent(`http://127.0.0.2:${standPort}/png`)}`, { allowAddress: standIn });
    assert.equal(r.kind, 'png', 'the redirect\'s target is fetched as a PNG');
    let url = `http://127.0.0.2:${standPort}/png`;
    for (let i = 0; i < 5; i++) url = `http://127.0.0.2:${standPort}/to?${encodeURIComponent(url)}`;
    await refusedWith(url, /redirects/);
  });
  it('enforces the size and time limits and judges the content', async () => {
    await refusedWith(`http://127.0.0.2:${standPort}/big`, /larger than 1000 bytes/, { allowAddress: standIn, maxBytes: 1000 } as never);
    const t0 = Date.now();
    await refusedWith(`http://127.0.0.2:${standPort}/hang`, /within 300 ms/, { allowAddress: standIn, timeoutMs: 300 } as never);
    assert.ok(Date.now() - t0 < 3000, `the 300 ms timeout ended the hanging fetch: ${Date.now() - t0} ms`);
    await refusedWith(`http://127.0.0.2:${standPort}/text`, /not a PNG, JPEG or WebP/);
  });
  it('refuses other schemes and credentials', async () => {
    await refusedWith('ftp://8.8.8.8/x.png', /only http/);
    await refusedWith('file:///etc/passwd', /only http/);
    await refusedWith(`http://user:pw@127.0.0.2:${standPort}/png`, /credentials/);
    await refusedWith('not a url', /not a valid URL/);
  });
});

describe('images: streaming multipart reader (pure)', () => {
  async function* chunked(b: Buffer, size: number) {
    for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
  }
  const limits = { maxBytes: 1 << 20, maxParts: 10, maxFieldBytes: 1000 };
  it('reads fields and files whatever the chunking', async () => {
    const f = form([{ name: 'prompt', value: 'a cat\r\n--not a boundary' }, { name: 'image[]', value: PNG, filename: 'x.png', type: 'image/png' }, { name: 'n', value: '2' }], 'XyZ');
    for (const size of [1, 3, 7, 64, 100_000]) {
      const parts = await readMultipart(chunked(f.body, size), 'XyZ', limits);
      assert.deepEqual(parts.map((p) => [p.name, p.filename]), [['prompt', null], ['image[]', 'x.png'], ['n', null]], `chunks of ${size} bytes: the parts' names and filenames in order`);
      assert.equal(parts[0]!.data.toString(), 'a cat\r\n--not a boundary', `chunks of ${size} bytes: a field value keeping a CRLF and a boundary-like line`);
      assert.ok(parts[1]!.data.equals(PNG), `the image part is the PNG: ${parts[1]!.data.length} bytes`);
    }
  });
  it('refuses a body over the limit at the chunk that crosses it, without reading on', async () => {
    let pulled = 0;
    async function* endless() {
      yield Buffer.from('--B\r\nContent-Disposition: form-data; name="image"; filename="a"\r\n\r\n');
      for (;;) {
        pulled++;
        yield Buffer.alloc(64 * 1024);
      }
    }
    await assert.rejects(readMultipart(endless(), 'B', limits), (e: unknown) => e instanceof MultipartError && e.kind === 'too_large');
    assert.ok(pulled <= 17, `pulled ${pulled} chunks`);
  });
  it('refuses malformed bodies, too many parts and oversized fields', async () => {
    const bad = async (body: string | Buffer, kind: string) =>
      assert.rejects(readMultipart(chunked(Buffer.from(body), 5), 'B', limits), (e: unknown) => e instanceof MultipartError && e.kind === kind);
    await bad('--B\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n', 'malformed'); // no closing boundary
    await bad('no boundary at all', 'malformed');
    await bad('--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--', 'malformed'); // no disposition
    await bad('--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--', 'malformed'); // no name
    await bad(Array.from({ length: 11 }, (_, i) => `--B\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\nx\r\n`).join('') + '--B--', 'too_many_parts');
    await bad(`--B\r\nContent-Disposition: form-data; name="prompt"\r\n\r\n${'x'.repeat(1001)}\r\n--B--`, 'field_too_large');
  });
});

describe('images: gateway', function () {
  this.timeout(60_000);
  const stack = useStack();
  let base: string;
  let simStatsLast: (prompt: string) => Promise<Record<string, unknown> | undefined>;
  before(async () => {
    base = stack.gateway.url;
    simStatsLast = async (prompt) => {
      const s = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ body: Record<string, unknown> }> };
      return s.last_requests.reverse().find((r) => r.body && r.body.prompt === prompt)?.body;
    };
  });

  describe('listing', () => {
    it('GET /v1/images/models lists image models with capabilities, parameters, limits and pricing in credits', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images/models', { key: a.key });
      assert.equal(r.status, 200, `the image model list answers: ${r.text.slice(0, 300)}`);
      // other suites add image models to the shared catalog (seen at once since catalog inserts notify)
      const ids = r.json.data.map((m: { id: string }) => m.id);
      assert.deepEqual(ids.filter((id: string) => id.startsWith('sim-')), ['sim-image-1', 'sim-image-mini'], 'the simulator\'s two image models are listed');
      assert.ok(ids.every((id: string) => !id.startsWith('sim-gpt')), 'text models are not listed');
      const one = r.json.data.find((m: { id: string }) => m.id === 'sim-image-1');
      assert.deepEqual(one.capabilities, ['image_generation', 'image_editing', 'streaming'], 'sim-image-1 generates, edits and streams');
      assert.ok(one.supported_parameters.includes('input_references'), `sim-image-1 supports input_references: ${one.supported_parameters.join(', ')}`);
      assert.equal(one.max_input_images, 8, 'sim-image-1 takes up to 8 input images');
      assert.equal(one.max_images, 4, 'sim-image-1 makes up to 4 images a request');
      assert.deepEqual(one.pricing, { per_image: 0.04, per_input_image: 0.01 }, 'sim-image-1 is priced per image and per input image, in credits');
      const mini = r.json.data.find((m: { id: string }) => m.id === 'sim-image-mini');
      assert.deepEqual(mini.capabilities, ['image_generation'], 'sim-image-mini only generates');
      assert.equal(mini.max_input_images, undefined, 'only edit-capable models state a maximum input image count');
    });
  });

  describe('generation and billing', () => {
    it('generates n images, holds n × rate, bills what was received (estimate), with the media usage object', async () => {
      const a = await newAccount({ credits: '10' });
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'a red fox', n: 2, size: '1024x1024', quality: 'low' } });
      assert.equal(r.status, 200, r.text);
      const id = r.headers.get('x-gateway-request-id')!;
      assert.match(id, /^[0-9a-f-]{36}$/, 'the request id is a UUID');
      assert.equal(r.headers.get('x-gateway-cost'), '0.08', 'the cost header is 2 × 0.04 credits');
      assert.equal(typeof r.json.created, 'number', 'the answer carries its creation time');
      assert.equal(r.json.data.length, 2, 'two images are returned');
      for (const d of r.json.data) {
        assert.equal(d.media_type, 'image/png', 'each image is labelled image/png');
        assert.ok(isPng(d.b64_json), `each image is a PNG: ${String(d.b64_json).slice(0, 40)}`);
      }
      const u = r.json.usage;
      assert.equal(u.cost, 0.08, 'the cost is 2 × 0.04 credits');
      assert.deepEqual(u.cost_details, { billing_source: 'estimate', is_estimate: true, reserved_credits: 0.08 }, 'an estimated cost, with the hold of 0.08');
      assert.deepEqual(u.balance, { before: 10, after: 9.92, reserved_credits: 0.08 }, 'the balance before and after, with the hold');
      assert.equal(u.prompt_tokens, 3, 'the prompt\'s tokens');
      assert.equal(u.completion_tokens, 2 * 272, '272 output tokens per image');
      assert.equal(u.total_tokens, 3 + 544, 'the total tokens are prompt plus output');
      const g = await generation(base, a.key, id);
      assert.equal(g.modality, 'image', 'the generation record is an image one');
      assert.equal(g.billing_source, 'estimate', 'the generation record is billed as an estimate');
      assert.equal(g.is_estimate, true, 'the generation record is marked an estimate');
      assert.equal(g.cost, 0.08, 'the generation record\'s cost is 0.08');
      assert.equal(g.reserved_credits, 0.08, 'the generation record keeps the hold of 0.08');
      assert.equal(g.usage_details.images_returned, 2, 'the generation record counts 2 images returned');
      assert.equal(g.usage_details.images_requested, 2, 'the generation record counts 2 images requested');
      assert.equal(await balance(a), '0.08', 'the account\'s usage is the 0.08 charged');
      await assertInvariants(a);
    });

    it('/v1/images/generations is the same endpoint; JPEG output is labelled by content', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images/generations', { key: a.key, body: { model: 'sim-image-1', prompt: 'jpeg please', output_format: 'jpeg', output_compression: 80 } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.data[0].media_type, 'image/jpeg', 'JPEG output is labelled image/jpeg');
      assert.equal(r.json.usage.cost, 0.04, 'one image costs 0.04');
      assert.equal((await generation(base, a.key, r.headers.get('x-gateway-request-id')!)).endpoint, '/v1/images/generations', 'the generation record keeps the alias endpoint');
    });

    it('bills only the images the provider returned (images_returned=1 of n=3)', async () => {
      const a = await newAccount({ credits: '5' });
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'three cats [sim images_returned=1]', n: 3 } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.data.length, 1, 'the provider returned only one image');
      assert.equal(r.json.usage.cost, 0.04, 'only the returned image is billed');
      assert.equal(r.json.usage.cost_details.reserved_credits, 0.12, 'the hold was for the 3 images asked for');
      const g = await generation(base, a.key, r.headers.get('x-gateway-request-id')!);
      assert.equal(g.cost, 0.04, 'the generation record bills one image');
      assert.equal(g.reserved_credits, 0.12, 'the generation record keeps the hold for 3 images');
      assert.equal(g.usage_details.images_returned, 1, 'the generation record counts 1 image returned');
      assert.equal(await balance(a), '0.04', 'the account\'s usage is the one image');
      await assertInvariants(a);
    });

    it('charges a provider-reported cost, converted to credits, capped at the hold', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'costly [sim cost=0.03]' } });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.usage.cost_details, { billing_source: 'provider_cost', is_estimate: false, reserved_credits: 0.04 }, 'the provider\'s cost is billed, not an estimate, against the hold of one image');
      assert.equal(r.json.usage.cost, 0.03, 'the provider\'s 0.03 is charged');
      const g = await generation(base, a.key, r.headers.get('x-gateway-request-id')!);
      assert.equal(g.billing_source, 'provider_cost', 'the generation record is billed at the provider\'s cost');
      assert.equal(g.cost, 0.03, 'the generation record\'s cost is the provider\'s 0.03');
      const capped = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'too costly [sim cost=5]' } });
      assert.equal(capped.json.usage.cost, 0.04, 'a provider cost over the hold is capped at the hold');
      assert.equal((await generation(base, a.key, capped.headers.get('x-gateway-request-id')!)).cost, 0.04, 'the generation record\'s cost is capped at the hold');
      await assertInvariants(a);
    });

    it('no image returned: 502 generation_failed, not billed; provider error: not billed', async () => {
      const a = await newAccount();
      const none = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'nothing [sim images_returned=0]' } });
      assert.equal(none.status, 502, `no image returned is a 502: ${none.text.slice(0, 300)}`);
      assert.equal(none.json.error.code, 'generation_failed', 'no image returned is generation_failed');
      const failed = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'boom [sim status=500]' } });
      assert.equal(failed.status, 502, `a provider error is a 502: ${failed.text.slice(0, 300)}`);
      assert.equal(failed.json.error.code, 'provider_error', 'a provider error is provider_error');
      const rows = await reservationsOf(a);
      assert.equal(rows.length, 2, 'both requests held credits');
      for (const row of rows) {
        const s = await settled(row.id);
        assert.equal(s.billing_source, 'not_billed', `reservation ${row.id} is not billed`);
        assert.equal(normalize(s.charge), '0', `reservation ${row.id} charges nothing`);
      }
      assert.equal(await balance(a), '0', 'the account was charged nothing');
      await assertInvariants(a);
    });

    it('402 when the balance cannot hold n images; complimentary on the free-trial plan', async () => {
      const poor = await newAccount({ credits: '0.05' });
      const r = await call(base, '/v1/images', { key: poor.key, body: { model: 'sim-image-1', prompt: 'two', n: 2 } });
      assert.equal(r.status, 402, `two images at 0.04 do not fit 0.05: ${r.text.slice(0, 300)}`);
      assert.equal(r.json.error.code, 'insufficient_quota', 'the refusal\'s code is insufficient_quota');
      assert.equal((await reservationsOf(poor)).length, 0, 'the refused request held nothing');
      const trial = await newAccount({ tier: 'free_trial', credits: '1' });
      const t = await call(base, '/v1/images', { key: trial.key, body: { model: 'sim-image-1', prompt: 'free' } });
      assert.equal(t.status, 200, t.text);
      assert.equal(t.json.usage.cost, 0, 'the free-trial image costs nothing');
      assert.equal(t.json.usage.cost_details.billing_source, 'complimentary', 'the free-trial image is complimentary');
      assert.equal((await generation(base, trial.key, t.headers.get('x-gateway-request-id')!)).billing_source, 'complimentary', 'the generation record is complimentary');
      await assertInvariants(trial);
    });

    it('input_references as base64 data URLs: edit through JSON, input images billed', async () => {
      const a = await newAccount();
      const prompt = `ref ${randomUUID()}`;
      const r = await call(base, '/v1/images', {
        key: a.key,
        body: { model: 'sim-image-1', prompt, input_references: [{ type: 'image_url', image_url: { url: dataUrl(JPEG, 'image/png') } }, { type: 'image_url', image_url: { url: dataUrl(WEBP) } }] },
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.usage.cost, 0.06, 'one image and two input images: 0.04 + 2 × 0.01'); // 0.04 + 2 × 0.01
      const sent = await simStatsLast(prompt);
      assert.ok(sent, 'the simulator saw the request');
      assert.equal((sent!.images as unknown[]).length, 2, 'both input images reached the provider');
      const g = await generation(base, a.key, r.headers.get('x-gateway-request-id')!);
      assert.equal(g.cost, 0.06, 'the generation record\'s cost includes the input images');
      assert.equal(g.usage_details.input_images, 2, 'the generation record counts 2 input images');
      await assertInvariants(a);
    });

    it('an image URL on a loopback or metadata address gets 400 and nothing is held', async () => {
      let reached = 0;
      const srv = http.createServer((_q, res) => {
        reached++;
        res.end(PNG);
      });
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
      const port = (srv.address() as AddressInfo).port;
      try {
        const a = await newAccount();
        for (const url of [`http://127.0.0.1:${port}/a.png`, `http://localhost:${port}/a.png`, 'http://169.254.169.254/latest/meta-data/', 'http://10.1.2.3/a.png']) {
          const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'x', input_references: [{ type: 'image_url', image_url: { url } }] } });
          assert.equal(r.status, 400, url);
          assert.equal(r.json.error.code, 'invalid_parameter', `${url}: the refusal is invalid_parameter`);
          assert.equal(r.json.error.param, 'input_references[0].image_url.url', `${url}: the refusal names the image URL's parameter`);
          assert.match(r.json.error.message, /public address/, `${url}: the refusal says the address is not public`);
        }
        assert.equal(reached, 0, 'the loopback server was never reached');
        assert.equal((await reservationsOf(a)).length, 0, 'no refused request held credits');
        assert.equal(await balance(a), '0', 'the account was charged nothing');
      } finally {
        srv.close();
      }
    });

    it('parameters a model accepts are forwarded (negative_prompt, guidance, steps, width/height)', async () => {
      const a = await newAccount();
      const prompt = `mini ${randomUUID()}`;
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-mini', prompt, n: 6, width: 512, height: 768, negative_prompt: 'blur', guidance: 7.5, steps: 30, seed: 42, response_format: 'b64_json', provider: { options: { simulator: { moderation: 'low', n: 9, images: [{ image_url: 'http://10.0.0.1/x.png' }] } } } } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.data.length, 6, 'all 6 images asked for are returned');
      assert.equal(r.json.usage.cost, 0.06, '6 images at 0.01');
      const sent = await simStatsLast(prompt);
      assert.equal(sent!.model, 'sim-image-mini-2026-01-15', 'the provider gets its versioned model name');
      assert.equal(sent!.size, '512x768', 'width and height reach the provider as its size');
      assert.equal(sent!.negative_prompt, 'blur', 'negative_prompt is forwarded');
      assert.equal(sent!.guidance, 7.5, 'guidance is forwarded');
      assert.equal(sent!.steps, 30, 'steps is forwarded');
      assert.equal(sent!.seed, 42, 'seed is forwarded');
      assert.equal(sent!.moderation, 'low', 'a provider option (moderation) is forwarded');
      assert.equal(sent!.n, 6, 'provider.options cannot change what is billed');
      assert.equal(sent!.images, undefined, 'provider.options cannot add input images (an address the guard would refuse)');
      assert.equal(sent!.response_format, undefined, 'response_format is not sent to the provider');
    });
  });

  describe('parameter rules (400 naming the parameter, nothing held)', () => {
    const cases: Array<[string, Record<string, unknown>, number, string, string | null]> = [
      ['model missing', { prompt: 'x' }, 400, 'missing_required_parameter', 'model'],
      ['prompt missing', { model: 'sim-image-1' }, 400, 'missing_required_parameter', 'prompt'],
      ['prompt over 32,000 characters', { model: 'sim-image-1', prompt: 'x'.repeat(32_001) }, 400, 'invalid_parameter', 'prompt'],
      ['n = 0', { model: 'sim-image-1', prompt: 'x', n: 0 }, 400, 'invalid_parameter', 'n'],
      ['n = 11', { model: 'sim-image-mini', prompt: 'x', n: 11 }, 400, 'invalid_parameter', 'n'],
      ['n above the model limit', { model: 'sim-image-1', prompt: 'x', n: 5 }, 400, 'invalid_parameter', 'n'],
      ['n not an integer', { model: 'sim-image-1', prompt: 'x', n: 1.5 }, 400, 'invalid_parameter', 'n'],
      ['size malformed', { model: 'sim-image-1', prompt: 'x', size: '1024x' }, 400, 'invalid_parameter', 'size'],
      ['size unknown tier', { model: 'sim-image-1', prompt: 'x', size: '3K' }, 400, 'invalid_parameter', 'size'],
      ['size and width', { model: 'sim-image-mini', prompt: 'x', size: '512', width: 512, height: 512 }, 400, 'invalid_parameter', 'width'],
      ['width without height', { model: 'sim-image-mini', prompt: 'x', width: 512 }, 400, 'missing_required_parameter', 'height'],
      ['width on a model without it', { model: 'sim-image-1', prompt: 'x', width: 512, height: 512 }, 400, 'unsupported_parameter', 'width'],
      ['resolution unknown', { model: 'sim-image-1', prompt: 'x', resolution: '8K' }, 400, 'invalid_parameter', 'resolution'],
      ['aspect_ratio malformed', { model: 'sim-image-1', prompt: 'x', aspect_ratio: '16/9' }, 400, 'invalid_parameter', 'aspect_ratio'],
      ['quality unknown', { model: 'sim-image-1', prompt: 'x', quality: 'ultra' }, 400, 'invalid_parameter', 'quality'],
      ['quality the model lacks', { model: 'sim-image-1', prompt: 'x', quality: 'xhigh' }, 400, 'invalid_parameter', 'quality'],
      ['quality on a model without it', { model: 'sim-image-mini', prompt: 'x', quality: 'low' }, 400, 'unsupported_parameter', 'quality'],
      ['output_format unknown', { model: 'sim-image-1', prompt: 'x', output_format: 'gif' }, 400, 'invalid_parameter', 'output_format'],
      ['output_format svg the model lacks', { model: 'sim-image-1', prompt: 'x', output_format: 'svg' }, 400, 'invalid_parameter', 'output_format'],
      ['output_compression with png', { model: 'sim-image-1', prompt: 'x', output_format: 'png', output_compression: 50 }, 400, 'invalid_parameter', 'output_compression'],
      ['output_compression above 100', { model: 'sim-image-1', prompt: 'x', output_format: 'webp', output_compression: 101 }, 400, 'invalid_parameter', 'output_compression'],
      ['transparent with jpeg', { model: 'sim-image-1', prompt: 'x', output_format: 'jpeg', background: 'transparent' }, 400, 'invalid_parameter', 'background'],
      ['background unknown', { model: 'sim-image-1', prompt: 'x', background: 'green' }, 400, 'invalid_parameter', 'background'],
      ['seed not an integer', { model: 'sim-image-1', prompt: 'x', seed: 'abc' }, 400, 'invalid_parameter', 'seed'],
      ['stream not a boolean', { model: 'sim-image-1', prompt: 'x', stream: 'yes' }, 400, 'invalid_parameter', 'stream'],
      ['response_format url', { model: 'sim-image-1', prompt: 'x', response_format: 'url' }, 400, 'invalid_parameter', 'response_format'],
      ['negative_prompt where no provider takes it', { model: 'sim-image-1', prompt: 'x', negative_prompt: 'y' }, 400, 'unsupported_parameter', 'negative_prompt'],
      ['guidance where no provider takes it', { model: 'sim-image-1', prompt: 'x', guidance: 3 }, 400, 'unsupported_parameter', 'guidance'],
      ['steps where no provider takes it', { model: 'sim-image-1', prompt: 'x', steps: 3 }, 400, 'unsupported_parameter', 'steps'],
      ['steps out of range', { model: 'sim-image-mini', prompt: 'x', steps: 0 }, 400, 'invalid_parameter', 'steps'],
      ['guidance out of range', { model: 'sim-image-mini', prompt: 'x', guidance: 101 }, 400, 'invalid_parameter', 'guidance'],
      ['unknown parameter', { model: 'sim-image-1', prompt: 'x', style: 'vivid' }, 400, 'unsupported_parameter', 'style'],
      ['mask in JSON', { model: 'sim-image-1', prompt: 'x', mask: 'abc' }, 400, 'unsupported_parameter', 'mask'],
      ['provider with other keys', { model: 'sim-image-1', prompt: 'x', provider: { order: ['a'] } }, 400, 'unsupported_parameter', 'provider.order'],
      ['input_references not an array', { model: 'sim-image-1', prompt: 'x', input_references: 'http://a' }, 400, 'invalid_parameter', 'input_references'],
      ['input_references item of another type', { model: 'sim-image-1', prompt: 'x', input_references: [{ type: 'video_url', video_url: { url: 'x' } }] }, 400, 'invalid_parameter', 'input_references[0].type'],
      ['input_references ftp url', { model: 'sim-image-1', prompt: 'x', input_references: [{ type: 'image_url', image_url: { url: 'ftp://a/b.png' } }] }, 400, 'invalid_parameter', 'input_references[0].image_url.url'],
      ['input_references data URL not an image', { model: 'sim-image-1', prompt: 'x', input_references: [{ type: 'image_url', image_url: { url: dataUrl(Buffer.from('GIF89a not really')) } }] }, 400, 'invalid_image_type', 'input_references[0].image_url.url'],
      ['input_references above the model limit', { model: 'sim-image-1', prompt: 'x', input_references: Array.from({ length: 9 }, () => ({ type: 'image_url', image_url: { url: dataUrl(PNG) } })) }, 400, 'invalid_parameter', 'input_references'],
      ['input_references on a model without editing', { model: 'sim-image-mini', prompt: 'x', input_references: [{ type: 'image_url', image_url: { url: dataUrl(PNG) } }] }, 400, 'unsupported_capability', 'model'],
      ['a text model', { model: 'sim-gpt', prompt: 'x' }, 400, 'unsupported_capability', 'model'],
      ['an unknown model', { model: 'nope', prompt: 'x' }, 403, 'model_not_found', 'model'],
    ];
    let a: TestAccount;
    before(async () => (a = await newAccount()));
    for (const [name, body, status, code, param] of cases) {
      it(name, async () => {
        const r = await call(base, '/v1/images', { key: a.key, body });
        assert.equal(r.status, status, r.text);
        assert.equal(r.json.error.code, code, `${name}: the error code`);
        assert.equal(r.json.error.param, param, `${name}: the error names the parameter`);
        assert.equal(r.json.error.type, 'invalid_request_error', `${name}: the error type`);
      });
    }
    it('left nothing held and nothing charged', async () => {
      assert.equal((await reservationsOf(a)).length, 0, 'no refused request held credits');
      assert.equal(await balance(a), '0', 'no refused request was charged');
      await assertInvariants(a);
    });
    it('the unsupported_capability message names the right endpoint', async () => {
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-gpt', prompt: 'x' } });
      assert.match(r.json.error.message, /\/v1\/chat\/completions/, `the message sends a text model to its endpoint: ${r.json.error.message}`);
    });
  });

  describe('streaming', () => {
    it('previews (not billed), one completed event with the final image and usage in credits, then [DONE]', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'streamed', stream: true } });
      assert.equal(r.status, 200, r.text);
      assert.match(r.headers.get('content-type')!, /text\/event-stream/, 'a stream answers as server-sent events');
      assert.equal(r.headers.get('x-gateway-cost'), null, 'a stream carries no cost header (the cost comes in the completed event)');
      const id = r.headers.get('x-gateway-request-id')!;
      assert.ok(id, 'a streamed image answer carries x-gateway-request-id');
      const frames = sseFrames(r.text);
      assert.deepEqual(frames.map((f) => f.event ?? f.data), ['image_generation.partial_image', 'image_generation.partial_image', 'image_generation.completed', '[DONE]'], 'two previews, one completed image, then [DONE]');
      for (const p of frames.slice(0, 2)) {
        assert.equal(p.data.type, 'image_generation.partial_image', 'each preview is a partial_image event');
        assert.ok(isPng(p.data.b64_json), `each partial image is a PNG: ${String(p.data.b64_json).slice(0, 40)}`);
        assert.equal(p.data.usage, undefined, 'a preview carries no usage (it is not billed)');
      }
      const done = frames[2]!.data;
      assert.ok(isPng(done.b64_json), `the completed image is a PNG: ${String(done.b64_json).slice(0, 40)}`);
      assert.notEqual(done.b64_json, frames[0]!.data.b64_json, 'the final image is not the first preview');
      assert.equal(done.usage.cost, 0.04, 'the completed event\'s cost is one image');
      assert.equal(done.usage.cost_details.billing_source, 'estimate', 'the completed event\'s cost is an estimate');
      const g = await generation(base, a.key, id);
      assert.equal(g.cost, 0.04, 'the generation record\'s cost is one image');
      assert.equal(g.usage_details.images_returned, 1, 'the generation record counts one image returned');
      await assertInvariants(a);
    });

    it('issue 33 item 9: partial_images 0–3 sends that many previews; outside 0–3 is a 400 holding nothing', async () => {
      const a = await newAccount();
      const answered: string[] = [];
      for (const partials of [0, 1, 3]) {
        const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: `previews ${partials}`, stream: true, partial_images: partials } });
        assert.equal(r.status, 200, `partial_images ${partials} is accepted: ${r.text}`);
        answered.push(r.headers.get('x-gateway-request-id')!);
        const frames = sseFrames(r.text);
        assert.deepEqual(
          frames.map((f) => f.event ?? f.data),
          [...Array<string>(partials).fill('image_generation.partial_image'), 'image_generation.completed', '[DONE]'],
          `${partials} previews, then the image`,
        );
        assert.deepEqual(frames.slice(0, partials).map((f) => f.data.partial_image_index), [...Array(partials).keys()], 'previews numbered from 0');
        for (const f of frames.slice(0, partials)) assert.ok(isPng(f.data.b64_json), 'each preview is an image');
      }
      const plain = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'no stream', partial_images: 2 } });
      assert.equal(plain.status, 200, `without stream it is accepted and the answer is plain: ${plain.text}`);
      assert.equal(plain.json.data.length, 1, 'one image, no previews');
      answered.push(plain.headers.get('x-gateway-request-id')!);
      for (const id of answered) await settled(id);
      const before = (await reservationsOf(a)).length;
      for (const bad of [4, -1, 1.5, '2']) {
        const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'x', stream: true, partial_images: bad } });
        assert.equal(r.status, 400, `partial_images ${JSON.stringify(bad)} is refused: ${r.text}`);
        assert.equal(r.json.error.param, 'partial_images', 'the error names the parameter');
      }
      assert.equal((await reservationsOf(a)).length, before, 'nothing was held for the refused requests');
      await assertInvariants(a);
    });

    it('issue 33 item 9: the official SDK streams partial_images previews from /v1/images/generations', async () => {
      const a = await newAccount();
      const client = new OpenAI({ apiKey: a.key, baseURL: `${base}/v1`, maxRetries: 0 });
      const stream = await client.images.generate({ model: 'sim-image-1', prompt: 'sdk previews', stream: true, partial_images: 3 });
      const types: string[] = [];
      for await (const ev of stream) types.push(`${ev.type}${ev.type === 'image_generation.partial_image' ? `#${ev.partial_image_index}` : ''}`);
      assert.deepEqual(types, ['image_generation.partial_image#0', 'image_generation.partial_image#1', 'image_generation.partial_image#2', 'image_generation.completed'], 'three previews then the image, as OpenAI streams them');
    });

    it('n=2 with one image returned: one completed image, billed once', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'two asked [sim images_returned=1]', n: 2, stream: true } });
      const frames = sseFrames(r.text);
      assert.equal(frames.filter((f) => f.event === 'image_generation.completed').length, 1, 'one completed event for the one image returned');
      assert.equal(frames.at(-1)!.data, '[DONE]', 'the stream ends with [DONE]');
      assert.equal(frames.at(-2)!.data.usage.cost, 0.04, 'only the image returned is billed');
      assert.equal(frames.at(-2)!.data.usage.cost_details.reserved_credits, 0.08, 'the hold was for the 2 images asked for');
      assert.equal((await generation(base, a.key, r.headers.get('x-gateway-request-id')!)).cost, 0.04, 'the generation record bills one image');
    });

    it('a stream that breaks after one of two images delivers and bills that one', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'dropped [sim drop_after=1]', n: 2, stream: true } });
      const frames = sseFrames(r.text);
      const completed = frames.filter((f) => f.event === 'image_generation.completed');
      assert.equal(completed.length, 1, 'the image sent before the break is completed');
      assert.equal(completed[0]!.data.usage.cost, 0.04, 'the image delivered is billed');
      assert.equal((await generation(base, a.key, r.headers.get('x-gateway-request-id')!)).cost, 0.04, 'the generation record bills only the image delivered');
      await assertInvariants(a);
    });

    /** A streaming image request the test can walk away from: the response with headers, its request id, the abort. */
    async function openImageStream(a: { key: string }, body: Record<string, unknown>) {
      const ac = new AbortController();
      const res = await fetch(`${base}/v1/images`, {
        method: 'POST',
        signal: ac.signal,
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { res, id: res.headers.get('x-gateway-request-id')!, ac };
    }

    it('a client that leaves mid-stream pays only for the images it received (outcome cancelled)', async () => {
      const a = await newAccount();
      const { res, id, ac } = await openImageStream(a, { model: 'sim-image-1', prompt: 'slow [sim chunk_delay=200]', n: 3, stream: true });
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('event: image_generation.completed')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
      ac.abort();
      const row = await settled(id);
      assert.equal(row.outcome, 'cancelled', 'the request that lost its client is cancelled');
      assert.equal(normalize(row.held_credits), '0.12', 'the hold was for 3 images');
      assert.equal(normalize(row.charge), '0.04', 'only the image received is charged');
      assert.equal(row.usage_details.images_returned, 1, 'one image counted as returned');
      await assertInvariants(a);
    });

    it('a client that leaves before the first image: outcome cancelled, not billed, the hold returns', async () => {
      const a = await newAccount();
      const { id, ac } = await openImageStream(a, { model: 'sim-image-1', prompt: 'slow [sim chunk_delay=400]', n: 2, stream: true });
      ac.abort();
      const row = await settled(id);
      assert.equal(row.outcome, 'cancelled', 'the request that lost its client is cancelled');
      assert.equal(row.billing_source, 'not_billed', 'nothing was billed before the first image');
      assert.equal(normalize(row.charge), '0', 'nothing was charged');
      await assertInvariants(a);
    });

    it('a model without streaming answers normally', async () => {
      const a = await newAccount();
      const r = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-mini', prompt: 'no stream', stream: true } });
      assert.equal(r.status, 200, r.text);
      assert.match(r.headers.get('content-type')!, /application\/json/, 'a model without streaming answers JSON');
      assert.equal(r.json.data.length, 1, 'one image is returned');
      assert.equal(r.json.usage.cost, 0.01, 'sim-image-mini\'s one image costs 0.01');
    });
  });

  describe('edits', () => {
    it('accepts PNG, JPEG and WebP judged by content (whatever their names), bills the input images', async () => {
      const a = await newAccount();
      const prompt = `edit ${randomUUID()}`;
      const f = form([
        { name: 'model', value: 'sim-image-1' },
        { name: 'prompt', value: prompt },
        { name: 'image[]', value: PNG, filename: 'photo.jpg', type: 'image/jpeg' },
        { name: 'image[]', value: JPEG, filename: 'scan.png', type: 'application/octet-stream' },
        { name: 'image[]', value: WEBP, filename: 'noext' },
        { name: 'n', value: '2' },
        { name: 'stream', value: 'false' },
      ]);
      const r = await postForm(base, a.key, f);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.data.length, 2, 'two images are returned');
      assert.equal(r.json.usage.cost, 0.11, '2 images and 3 input images: 2 × 0.04 + 3 × 0.01'); // 2 × 0.04 + 3 × 0.01
      const sent = await simStatsLast(prompt);
      assert.equal((sent!.images as unknown[]).length, 3, 'all three uploads reached the provider');
      const g = await generation(base, a.key, r.headers.get('x-gateway-request-id')!);
      assert.equal(g.endpoint, '/v1/images/edits', 'the generation record keeps the edits endpoint');
      assert.equal(g.cost, 0.11, 'the generation record\'s cost includes the input images');
      assert.equal(g.modality, 'image', 'the generation record is an image one');
      await assertInvariants(a);
    });

    it('streams edits as image_generation events', async () => {
      const a = await newAccount();
      const r = await postForm(base, a.key, form([{ name: 'model', value: 'sim-image-1' }, { name: 'prompt', value: 's' }, { name: 'image', value: PNG, filename: 'a.png' }, { name: 'stream', value: 'true' }]));
      const frames = sseFrames(r.text);
      assert.deepEqual(frames.map((f) => f.event ?? f.data), ['image_generation.partial_image', 'image_generation.partial_image', 'image_generation.completed', '[DONE]'], 'two previews, one completed image, then [DONE]');
      assert.equal(frames[2]!.data.usage.cost, 0.05, 'one image and one input image: 0.04 + 0.01');
    });

    const base4 = (extra: FormPart[]) => [{ name: 'model', value: 'sim-image-1' }, { name: 'prompt', value: 'p' }, ...extra];
    const editCases: Array<[string, () => { body: Buffer; type: string }, number, string, string | null]> = [
      ['a file that is not an image, named .png', () => form(base4([{ name: 'image', value: Buffer.from('GIF89a......'), filename: 'x.png', type: 'image/png' }])), 400, 'invalid_image_type', 'image'],
      ['mask', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, { name: 'mask', value: PNG, filename: 'm.png' }])), 400, 'unsupported_parameter', 'mask'],
      ['no image', () => form(base4([])), 400, 'missing_required_parameter', 'image'],
      ['17 images', () => form(base4(Array.from({ length: 17 }, () => ({ name: 'image[]', value: PNG, filename: 'a.png' })))), 400, 'invalid_parameter', 'image'],
      ['9 images, above the model limit of 8', () => form(base4(Array.from({ length: 9 }, () => ({ name: 'image[]', value: PNG, filename: 'a.png' })))), 400, 'invalid_parameter', 'image'],
      ['a text field holding a file', () => form([{ name: 'model', value: 'sim-image-1' }, { name: 'prompt', value: 'p', filename: 'p.txt' }, { name: 'image', value: PNG, filename: 'a.png' }]), 400, 'invalid_multipart', null],
      ['too many fields', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, ...Array.from({ length: 50 }, () => ({ name: 'n', value: '1' }))])), 400, 'invalid_multipart', null],
      ['a repeated text field', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, { name: 'n', value: '1' }, { name: 'n', value: '2' }])), 400, 'invalid_multipart', null],
      ['an unknown field', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, { name: 'style', value: 'x' }])), 400, 'unsupported_parameter', 'style'],
      ['n as text that is not a number', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, { name: 'n', value: 'two' }])), 400, 'invalid_parameter', 'n'],
      ['stream neither true nor false', () => form(base4([{ name: 'image', value: PNG, filename: 'a.png' }, { name: 'stream', value: 'yes' }])), 400, 'invalid_parameter', 'stream'],
      ['a model without editing', () => form([{ name: 'model', value: 'sim-image-mini' }, { name: 'prompt', value: 'p' }, { name: 'image', value: PNG, filename: 'a.png' }]), 400, 'unsupported_capability', 'model'],
      ['malformed multipart (no closing boundary)', () => {
        const f = form(base4([{ name: 'image', value: PNG, filename: 'a.png' }]));
        return { ...f, body: f.body.subarray(0, f.body.length - 10) };
      }, 400, 'invalid_multipart', null],
      ['multipart without a boundary', () => ({ body: Buffer.from('x'), type: 'multipart/form-data' }), 400, 'invalid_multipart', null],
      ['a JSON body', () => ({ body: Buffer.from(JSON.stringify({ model: 'sim-image-1', prompt: 'p' })), type: 'application/json' }), 415, 'unsupported_media_type', null],
    ];
    let a: TestAccount;
    before(async () => (a = await newAccount()));
    for (const [name, make, status, code, param] of editCases) {
      it(`${status} ${code}: ${name}`, async () => {
        const r = await postForm(base, a.key, make());
        assert.equal(r.status, status, r.text);
        assert.equal(r.json.error.code, code, `${name}: the error code`);
        assert.equal(r.json.error.param, param, `${name}: the error names the parameter`);
      });
    }
    it('left nothing held and nothing charged', async () => {
      assert.equal((await reservationsOf(a)).length, 0, 'no refused upload held credits');
      assert.equal(await balance(a), '0', 'no refused upload was charged');
    });

    it('refuses an upload over 20 MB while it streams: 413 arrives before the body ends, nothing held', async () => {
      const acct = await newAccount();
      const url = new URL(`${base}/v1/images/edits`);
      const boundary = 'BIG';
      let sent = 0;
      const result = await new Promise<{ status: number; body: string; sentWhenAnswered: number }>((resolve, reject) => {
        const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' } });
        req.on('response', (res) => {
          const sentWhenAnswered = sent;
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => {
            req.destroy();
            resolve({ status: res.statusCode!, body, sentWhenAnswered });
          });
        });
        req.on('error', (e) => (sent > 0 ? undefined : reject(e)));
        req.write(`--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nsim-image-1\r\n--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="big.png"\r\n\r\n`);
        req.write(PNG);
        // 1 MB a chunk, paced by back-pressure; the body never ends unless the server waits for
        // it (then the test times out: the upload was buffered before the check).
        const chunk = Buffer.alloc(1024 * 1024, 7);
        const pump = () => {
          while (sent < 40 * 1024 * 1024) {
            sent += chunk.length;
            if (!req.write(chunk)) return void req.once('drain', pump);
          }
        };
        pump();
      });
      assert.equal(result.status, 413, `the oversized upload is refused with 413: ${result.body.slice(0, 300)}`);
      assert.equal(JSON.parse(result.body).error.code, 'request_too_large', 'the refusal\'s code is request_too_large');
      assert.ok(result.sentWhenAnswered < 40 * 1024 * 1024, `answered only after ${result.sentWhenAnswered} bytes`);
      assert.equal((await reservationsOf(acct)).length, 0, 'the refused upload held nothing');
      assert.equal(await balance(acct), '0', 'the refused upload was charged nothing');
    });

    it('a declared Content-Length over 20 MB is refused before reading', async () => {
      const acct = await newAccount();
      const url = new URL(`${base}/v1/images/edits`);
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'multipart/form-data; boundary=X', 'content-length': String(21 * 1024 * 1024) } });
        req.on('response', (res) => {
          res.resume();
          req.destroy();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.write('--X\r\n'); // and nothing more
      });
      assert.equal(status, 413, 'a declared body over 20 MB is refused with 413');
    });
  });

  describe('idempotency', () => {
    it('same key and same content: 409 idempotent_replay, not processed, not billed', async () => {
      const a = await newAccount();
      const key = `img-${randomUUID()}`;
      const body = { model: 'sim-image-1', prompt: 'once', n: 1, seed: 7 };
      const first = await call(base, '/v1/images', { key: a.key, body, headers: { 'idempotency-key': key } });
      assert.equal(first.status, 200, first.text);
      const again = await call(base, '/v1/images', { key: a.key, body: { seed: 7, n: 1, prompt: 'once', model: 'sim-image-1' }, headers: { 'idempotency-key': key } });
      assert.equal(again.status, 409, `the same content under the same key is refused: ${again.text.slice(0, 300)}`);
      assert.equal(again.json.error.code, 'idempotent_replay', 'the refusal\'s code is idempotent_replay');
      const other = await call(base, '/v1/images', { key: a.key, body: { ...body, prompt: 'twice' }, headers: { 'idempotency-key': key } });
      assert.equal(other.status, 409, `other content under the same key is refused: ${other.text.slice(0, 300)}`);
      assert.equal(other.json.error.code, 'idempotency_key_reused', 'the refusal\'s code is idempotency_key_reused');
      const rows = await reservationsOf(a);
      assert.equal(rows.length, 1, 'only the first request held credits');
      await settled(rows[0].id);
      assert.equal(await balance(a), '0.04', 'only the first request was charged');
      // another account may use the same key
      const b = await newAccount();
      assert.equal((await call(base, '/v1/images', { key: b.key, body, headers: { 'idempotency-key': key } })).status, 200, 'another account may use the same key');
      await assertInvariants(a);
    });

    it('edits: the same form twice is a replay, another file under the key is reused', async () => {
      const a = await newAccount();
      const key = `edit-${randomUUID()}`;
      const parts = [{ name: 'model', value: 'sim-image-1' }, { name: 'prompt', value: 'p' }, { name: 'image', value: PNG, filename: 'a.png' }];
      assert.equal((await postForm(base, a.key, form(parts), { 'idempotency-key': key })).status, 200, 'the first edit under the key answers');
      const again = await postForm(base, a.key, form(parts), { 'idempotency-key': key }); // other boundary, same content
      assert.equal(again.json.error.code, 'idempotent_replay', 'the same form under another boundary is a replay');
      const other = await postForm(base, a.key, form([...parts.slice(0, 2), { name: 'image', value: JPEG, filename: 'a.png' }]), { 'idempotency-key': key });
      assert.equal(other.json.error.code, 'idempotency_key_reused', 'another file under the key is a reuse of the key');
      assert.equal((await reservationsOf(a)).length, 1, 'only the first edit held credits');
    });

    it('a key is not spent by a rejected request or a provider failure', async () => {
      const a = await newAccount();
      const key = `k-${randomUUID()}`;
      const bad = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'x', n: 99 }, headers: { 'idempotency-key': key } });
      assert.equal(bad.status, 400, `n=99 is refused: ${bad.text.slice(0, 300)}`);
      const failing = { model: 'sim-image-1', prompt: 'x [sim status=500]' };
      assert.equal((await call(base, '/v1/images', { key: a.key, body: failing, headers: { 'idempotency-key': key } })).status, 502, 'a provider failure under the key answers 502');
      assert.equal((await call(base, '/v1/images', { key: a.key, body: failing, headers: { 'idempotency-key': key } })).status, 502, 'processed again, not a replay');
      const ok = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'x' }, headers: { 'idempotency-key': key } });
      assert.equal(ok.status, 200, ok.text);
      const invalidKey = await call(base, '/v1/images', { key: a.key, body: { model: 'sim-image-1', prompt: 'x' }, headers: { 'idempotency-key': 'has space' } });
      assert.equal(invalidKey.status, 400, 'an idempotency key with a space is refused');
      assert.equal(invalidKey.json.error.param, 'Idempotency-Key', 'the refusal names the Idempotency-Key header');
      for (const r of await reservationsOf(a)) await settled(r.id);
      assert.equal(await balance(a), '0.04', 'only the successful request was charged');
      await assertInvariants(a);
    });
  });
});
