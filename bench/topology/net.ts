import { execFileSync } from 'node:child_process';

// The simulated hosts of `npm run topology`: one Linux network namespace per host, each with its
// own loopback and one veth (eth0) into a switch namespace that holds a bridge. The test's subnet
// exists only inside these namespaces; the machine's own network is not touched. Needs root.

export const SUBNET = '10.77.0';
const PREFIX = 'gwtopo';

export interface Host {
  /** short name (≤ 8 characters): the namespace is gwtopo-<name> */
  name: string;
  /** last octet of its address in SUBNET.0/24 */
  octet: number;
}

const ip = (args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();

export const nsOf = (h: Pick<Host, 'name'>) => `${PREFIX}-${h.name}`;
export const addressOf = (h: Pick<Host, 'octet'>) => `${SUBNET}.${h.octet}`;
const SWITCH = `${PREFIX}-switch`;
/** the switch's end of a host's cable */
const portOf = (h: Pick<Host, 'name'>) => `p-${h.name}`;

/** Namespaces left by an earlier run that died before its teardown. */
export function leftovers(): string[] {
  return ip(['netns', 'list'])
    .split('\n')
    .map((l) => l.split(' ')[0])
    .filter((n) => n.startsWith(`${PREFIX}-`));
}

/** Creates the switch and every host, cabled and addressed; removes an earlier run's first. */
export function createNetwork(hosts: Host[]): void {
  teardown();
  ip(['netns', 'add', SWITCH]);
  ip(['-n', SWITCH, 'link', 'add', 'br0', 'type', 'bridge']);
  ip(['-n', SWITCH, 'link', 'set', 'br0', 'up']);
  for (const h of hosts) {
    const ns = nsOf(h);
    ip(['netns', 'add', ns]);
    ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    ip(['-n', SWITCH, 'link', 'add', portOf(h), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    ip(['-n', SWITCH, 'link', 'set', portOf(h), 'master', 'br0', 'up']);
    ip(['-n', ns, 'addr', 'add', `${addressOf(h)}/24`, 'dev', 'eth0']);
    ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
  }
}

/** Unplugs (or plugs back) a host's cable at the switch: its packets go nowhere, its processes run on. */
export function setLink(h: Host, up: boolean): void {
  ip(['-n', SWITCH, 'link', 'set', portOf(h), up ? 'up' : 'down']);
}

/** Deletes every namespace of the topology (their veths go with them). */
export function teardown(): void {
  for (const ns of leftovers()) ip(['netns', 'delete', ns]);
}
