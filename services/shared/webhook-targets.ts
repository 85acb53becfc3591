import dns from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector } from 'undici';

// Where webhooks may be sent (the panel's, issue 17 item 4, and the gateway's account webhooks), and which
// addresses the image URL fetcher may reach (isPublicAddress): only to
// public addresses, never to private, loopback, link-local or reserved ones in any spelling (a panel must
// not be a way into its own network), unless the operator allows them (PANEL_WEBHOOK_ALLOW_TARGETS or
// GATEWAY_WEBHOOK_ALLOW_TARGETS: IPs or CIDR blocks; tests allow 127.0.0.1). Decided at creation and again
// on every address actually connected to (guardedAgent), so a name that resolves differently later cannot slip through.

type Bytes = number[];

/** The address's bytes (4 or 16) in any spelling the URL parser accepts (2130706433, 0x7f.1, 127.1, ::ffff:7f00:1), or null. */
function bytesOf(address: string): Bytes | null {
  const bare = address.replace(/^\[|\]$/g, '');
  if (bare.includes(':')) {
    let host: string;
    try {
      host = new URL(`http://[${bare}]/`).hostname.slice(1, -1); // canonical: lower-case hex pieces, one "::"
    } catch {
      return null; // not IPv6, or with a zone id (scoped, so never public)
    }
    const [head, tail] = host.split('::');
    const pieces = (s: string | undefined) => (s ? s.split(':').map((p) => parseInt(p, 16)) : []);
    const h = pieces(head), t = pieces(tail);
    const all = tail === undefined ? h : [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
    return all.flatMap((p) => [p >> 8, p & 0xff]);
  }
  let host: string;
  try {
    host = new URL(`http://${bare}/`).hostname;
  } catch {
    return null;
  }
  return net.isIPv4(host) ? host.split('.').map(Number) : null;
}

const prefix = (cidr: string): [Bytes, number] => {
  const [addr, bits] = cidr.split('/');
  return [bytesOf(addr)!, Number(bits)];
};
const within = (a: Bytes, [p, bits]: [Bytes, number]) =>
  a.length === p.length && p.every((byte, i) => i * 8 >= bits || ((a[i] ^ byte) & (0xff << (8 - Math.min(8, bits - i * 8)))) === 0);
const text = (a: Bytes) =>
  a.length === 4 ? a.join('.') : new URL(`http://[${Array.from({ length: 8 }, (_, i) => ((a[2 * i] << 8) | a[2 * i + 1]).toString(16)).join(':')}]/`).hostname.slice(1, -1);

// IANA's special-purpose IPv4 blocks that are not globally reachable (RFC 6890 and successors).
const IPV4_INTERNAL = ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24',
  '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4'].map(prefix);
// IPv6 forms that carry an IPv4 address: judged by that address (where the packets end up).
const MAPPED = prefix('::ffff:0:0/96'), NAT64 = prefix('64:ff9b::/96'), SIX_TO_FOUR = prefix('2002::/16'), TEREDO = prefix('2001::/32');
// Public IPv6 is global unicast 2000::/3, less these: IETF protocol assignments (benchmarking, ORCHID…), documentation.
const GLOBAL_UNICAST = prefix('2000::/3');
const IPV6_INTERNAL = ['2001::/23', '2001:db8::/32', '3fff::/20'].map(prefix);

/** The IPv4 addresses an IPv6 address hands its packets to (Teredo: its server and its client, whose bits are inverted). */
function embeddedIpv4(a: Bytes): Bytes[] | null {
  if (within(a, MAPPED) || within(a, NAT64)) return [a.slice(12)];
  if (within(a, SIX_TO_FOUR)) return [a.slice(2, 6)];
  if (within(a, TEREDO)) return [a.slice(4, 8), a.slice(12).map((b) => b ^ 0xff)];
  return null;
}

function internalReason(a: Bytes): string | null {
  if (a.length === 4) return IPV4_INTERNAL.some((p) => within(a, p)) ? 'a private, loopback, link-local or reserved address' : null;
  const inner = embeddedIpv4(a);
  if (inner) {
    const bad = inner.find((v4) => internalReason(v4));
    return bad ? `an IPv6 form of the internal address ${text(bad)}` : null;
  }
  // Outside 2000::/3 are ::1, ::, IPv4-compatible ::a.b.c.d (deprecated), 64:ff9b:1::/48 (local NAT64), fc00::/7, fe80::/10, ff00::/8…
  if (!within(a, GLOBAL_UNICAST) || IPV6_INTERNAL.some((p) => within(a, p))) return 'a private, loopback, link-local or reserved address';
  return null;
}

/** True only for a public address written as a standard IP literal (a resolved address: the image URL fetcher's check; a host name is never one). */
export function isPublicAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '');
  const a = net.isIP(bare) ? bytesOf(bare) : null;
  return a !== null && internalReason(a) === null;
}

/** The operator's allowed internal targets (IP addresses or CIDR blocks). */
export function allowList(entries: string[]): net.BlockList {
  const b = new net.BlockList();
  for (const e of entries) {
    const [addr, bits] = e.split('/');
    const type = net.isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    b.addSubnet(addr, bits === undefined ? (type === 'ipv6' ? 128 : 32) : Number(bits), type);
  }
  return b;
}

/** Why an address (any spelling) may not be a webhook target, or null. */
export function refusal(address: string, allowed: net.BlockList): string | null {
  const a = bytesOf(address);
  if (!a) return `${address} is not an IP address`;
  if (allowed.check(text(a), a.length === 4 ? 'ipv4' : 'ipv6')) return null;
  const why = internalReason(a);
  return why && `${address} is ${why} (the operator may allow it: PANEL_WEBHOOK_ALLOW_TARGETS)`;
}

/** Resolves a host and checks every address it has; throws with the reason when one is refused. */
export async function checkHost(host: string, allowed: net.BlockList): Promise<dns.LookupAddress[]> {
  const literal = bytesOf(host);
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = literal ? [{ address: bare, family: literal.length === 4 ? 4 : 6 }] : await dns.promises.lookup(bare, { all: true });
  for (const a of addresses) {
    const why = refusal(a.address, allowed);
    if (why) throw new TargetRefused(why);
  }
  return addresses;
}

export class TargetRefused extends Error {}

/** An HTTP dispatcher that connects only to addresses checkHost accepts (no redirects are followed by undici.request).
 *  Node connects to an IP literal without a lookup, so literals are checked before connecting; names at their lookup. */
export function guardedAgent(allowed: net.BlockList): Agent {
  const connector = buildConnector({
    lookup: (hostname: string, options: dns.LookupOptions, cb: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void) => {
      checkHost(hostname, allowed).then(
        (all) => (options.all ? cb(null, all) : cb(null, all[0].address, all[0].family)),
        (err) => cb(err as Error, ''),
      );
    },
  });
  return new Agent({
    connect: (opts, cb) => {
      const why = bytesOf(opts.hostname) && refusal(opts.hostname, allowed);
      if (why) cb(new TargetRefused(why), null);
      else connector(opts, cb);
    },
  });
}
