import dns from 'node:dns';
import net from 'node:net';
import { Agent } from 'undici';

// Where webhooks may be sent (the panel's, issue 17 item 4, and the gateway's account webhooks): never to private, loopback, link-local or other
// internal addresses (a panel must not be a way into its own network), unless the operator allows
// those addresses (PANEL_WEBHOOK_ALLOW_TARGETS or GATEWAY_WEBHOOK_ALLOW_TARGETS: IPs or CIDR blocks; tests allow 127.0.0.1). The check
// is made on the address actually connected to (the dispatcher's DNS lookup), so a host name that
// resolves differently at delivery time cannot slip through.

const INTERNAL: Array<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'], ['10.0.0.0', 8, 'ipv4'], ['100.64.0.0', 10, 'ipv4'], ['127.0.0.0', 8, 'ipv4'], ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'], ['192.0.0.0', 24, 'ipv4'], ['192.168.0.0', 16, 'ipv4'], ['198.18.0.0', 15, 'ipv4'], ['224.0.0.0', 3, 'ipv4'],
  ['::', 127, 'ipv6'], ['::ffff:0:0', 96, 'ipv6'], ['64:ff9b::', 96, 'ipv6'], ['fc00::', 7, 'ipv6'], ['fe80::', 10, 'ipv6'], ['ff00::', 8, 'ipv6'],
];

const blockList = (entries: Array<[string, number, 'ipv4' | 'ipv6']>) => {
  const b = new net.BlockList();
  for (const [addr, bits, type] of entries) b.addSubnet(addr, bits, type);
  return b;
};
const internal = blockList(INTERNAL);

/** The operator's allowed internal targets (IP addresses or CIDR blocks). */
export function allowList(entries: string[]): net.BlockList {
  return blockList(
    entries.map((e) => {
      const [addr, bits] = e.split('/');
      const type = net.isIP(addr) === 6 ? 'ipv6' : 'ipv4';
      return [addr, bits === undefined ? (type === 'ipv6' ? 128 : 32) : Number(bits), type];
    }),
  );
}

/** Why an address may not be a webhook target, or null. */
export function refusal(address: string, allowed: net.BlockList): string | null {
  const type = net.isIP(address) === 6 ? 'ipv6' : 'ipv4';
  if (allowed.check(address, type) || !internal.check(address, type)) return null;
  return `${address} is a private, loopback or otherwise internal address (the operator may allow it: PANEL_WEBHOOK_ALLOW_TARGETS)`;
}

/** Resolves a host and checks every address it has; throws with the reason when one is refused. */
export async function checkHost(host: string, allowed: net.BlockList): Promise<dns.LookupAddress[]> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = net.isIP(bare) ? [{ address: bare, family: net.isIP(bare) }] : await dns.promises.lookup(bare, { all: true });
  for (const a of addresses) {
    const why = refusal(a.address, allowed);
    if (why) throw new TargetRefused(why);
  }
  return addresses;
}

export class TargetRefused extends Error {}

/** An HTTP dispatcher that connects only to addresses checkHost accepts (no redirects are followed by undici.request). */
export function guardedAgent(allowed: net.BlockList): Agent {
  return new Agent({
    connect: {
      lookup: (hostname: string, options: dns.LookupOptions, cb: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void) => {
        checkHost(hostname, allowed).then(
          (all) => (options.all ? cb(null, all) : cb(null, all[0].address, all[0].family)),
          (err) => cb(err as Error, ''),
        );
      },
    },
  });
}
