import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { allowList, checkHost, guardedAgent, refusal, TargetRefused } from '../../services/shared/webhook-targets';

// The webhook target guard (issue 33 item 6), decided on addresses alone: public IPv4 and IPv6 pass, every
// internal address is refused in every spelling and IPv6 form that carries it. No traffic leaves loopback:
// the dispatcher is tried only against a local server.

const none = allowList([]);

const PASS: Array<[string, string]> = [
  ['8.8.8.8', 'public IPv4'],
  ['1.1.1.1', 'public IPv4'],
  ['93.184.216.34', 'public IPv4'],
  ['134744072', 'decimal spelling of 8.8.8.8'],
  ['2001:4860:4860::8888', 'public IPv6'],
  ['2606:4700:4700::1111', 'public IPv6'],
  ['[2a00:1450:4001:80b::200e]', 'bracketed public IPv6'],
  ['::ffff:8.8.8.8', 'IPv4-mapped public'],
  ['64:ff9b::808:808', 'NAT64 of a public IPv4'],
  ['2002:808:808::1', '6to4 of a public IPv4'],
  ['2001:0:808:808:0:f227:f7f7:f7f7', 'Teredo with public server and client (8.8.8.8 inverted)'],
];

const REFUSE: Array<[string, string]> = [
  ['127.0.0.1', 'IPv4 loopback'],
  ['127.255.255.254', 'IPv4 loopback range'],
  ['10.1.2.3', 'RFC 1918'],
  ['172.16.0.1', 'RFC 1918'],
  ['172.31.255.255', 'RFC 1918'],
  ['192.168.1.1', 'RFC 1918'],
  ['169.254.169.254', 'link-local (cloud metadata)'],
  ['100.64.0.1', 'carrier-grade NAT'],
  ['0.0.0.0', 'unspecified'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['192.0.2.1', 'TEST-NET-1'],
  ['198.51.100.7', 'TEST-NET-2'],
  ['203.0.113.9', 'TEST-NET-3'],
  ['198.18.0.1', 'benchmarking'],
  ['192.88.99.1', '6to4 relay anycast (deprecated)'],
  ['224.0.0.1', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['2130706433', 'decimal loopback'],
  ['0177.0.0.1', 'octal loopback'],
  ['0x7f.1', 'hex short loopback'],
  ['0x7f000001', 'hex loopback'],
  ['127.1', 'short loopback'],
  ['012.0.0.1', 'octal 10.0.0.1'],
  ['::1', 'IPv6 loopback'],
  ['[::1]', 'bracketed IPv6 loopback'],
  ['::', 'IPv6 unspecified'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback in hex'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped link-local'],
  ['::7f00:1', 'IPv4-compatible loopback'],
  ['::127.0.0.1', 'IPv4-compatible loopback, dotted'],
  ['::8.8.8.8', 'IPv4-compatible (deprecated form, even of a public address)'],
  ['::ffff:0:7f00:1', 'IPv4-translated loopback (RFC 2765)'],
  ['2002:7f00:1::', '6to4 of loopback'],
  ['2002:c0a8:101::1', '6to4 of 192.168.1.1'],
  ['2002:a00:1::', '6to4 of 10.0.0.1'],
  ['64:ff9b::7f00:1', 'NAT64 of loopback'],
  ['64:ff9b::10.0.0.1', 'NAT64 of RFC 1918, dotted'],
  ['64:ff9b:1::808:808', 'local-use NAT64 (64:ff9b:1::/48)'],
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'Teredo whose client is 127.0.0.1 (obfuscated)'],
  ['2001:0:7f00:1:0:f227:f7f7:f7f7', 'Teredo whose server is 127.0.0.1'],
  ['2001:0:808:808:0:0:f5ff:fffe', 'Teredo whose client is 10.0.0.1 (obfuscated)'],
  ['fc00::1', 'unique local'],
  ['fd12:3456:789a::1', 'unique local'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local with a zone'],
  ['fec0::1', 'site-local (deprecated)'],
  ['ff02::1', 'multicast'],
  ['100::1', 'discard-only'],
  ['2001:db8::1', 'documentation'],
  ['3fff::1', 'documentation (RFC 9637)'],
  ['2001:2::1', 'benchmarking'],
  ['2001:10::1', 'ORCHID'],
  ['not-an-ip', 'a name is not an address'],
];

describe('issue 33 item 6: the webhook target guard decides on the address', function () {
  for (const [address, what] of PASS) {
    it(`passes ${address} (${what})`, () => {
      assert.equal(refusal(address, none), null, `${address} (${what}) must be an accepted target`);
    });
  }
  for (const [address, what] of REFUSE) {
    it(`refuses ${address} (${what})`, () => {
      const why = refusal(address, none);
      assert.ok(why, `${address} (${what}) must be refused`);
      assert.match(why, /internal|private|reserved|not an IP/, `the reason for ${address} says why: ${why}`);
    });
  }

  it('the operator allow list lets an internal address through, in any spelling of it', () => {
    const allowed = allowList(['127.0.0.1', '10.0.0.0/8', 'fd00::/8']);
    for (const a of ['127.0.0.1', '2130706433', '127.1', '10.9.8.7', 'fd00::5', '::ffff:127.0.0.1']) {
      assert.equal(refusal(a, allowed), null, `${a} is allowed by the operator`);
    }
    assert.ok(refusal('192.168.1.1', allowed), '192.168.1.1 is not in the allow list and stays refused');
    assert.ok(refusal('::1', allowed), '::1 is not in the allow list and stays refused');
  });

  it('checkHost refuses a literal in any spelling and a name that resolves to loopback', async () => {
    for (const host of ['[::7f00:1]', '[2002:7f00:1::]', '0x7f.1', 'localhost']) {
      await assert.rejects(checkHost(host, none), TargetRefused, `${host} must be refused at creation`);
    }
    const ok = await checkHost('[2001:4860:4860::8888]', none);
    assert.deepEqual(ok.map((a) => a.address), ['2001:4860:4860::8888'], 'a public literal is accepted without any lookup');
  });

  describe('the guarded dispatcher checks at delivery time', function () {
    let server: http.Server;
    let port: number;
    let connections = 0;
    before(async () => {
      server = http.createServer((_req, res) => res.end('ok'));
      server.on('connection', () => connections++);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as AddressInfo).port;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));

    it('refuses loopback literals (connected to without a lookup) and names resolving to loopback; connects when allowed', async () => {
      const dispatcher = guardedAgent(none);
      for (const url of [`http://127.0.0.1:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`, `http://2130706433:${port}/`, `http://localhost:${port}/`]) {
        await assert.rejects(request(url, { dispatcher }), (err: Error) => err instanceof TargetRefused || (err.cause as Error) instanceof TargetRefused || /internal|loopback/.test(err.message), `${url} must be refused at delivery`);
      }
      assert.equal(connections, 0, 'no refused delivery reached the server');
      const allowed = guardedAgent(allowList(['127.0.0.1']));
      const res = await request(`http://127.0.0.1:${port}/`, { dispatcher: allowed });
      assert.equal(await res.body.text(), 'ok', 'an allowed target is delivered to');
      assert.equal(connections, 1, 'the allowed delivery connected once');
    });
  });
});
