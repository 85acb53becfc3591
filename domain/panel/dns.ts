import { isDomain } from './node-ops';

// DNS zones of customer accounts (a counted item of spec 2.3): records validated here, rendered as a
// BIND zone file that the hosting node checks (named-checkzone) before it writes it. Pure.

export const RECORD_TYPES = ['A', 'AAAA', 'CNAME', 'MX', 'TXT', 'NS', 'SRV', 'CAA'] as const;
export type RecordType = (typeof RECORD_TYPES)[number];

export interface DnsRecord {
  /** relative to the zone: `@` for the apex, `www`, `_sip._tcp` … */
  name: string;
  type: RecordType;
  ttl?: number;
  /** the record data: an address, a target name, text, or `priority target` (MX), `priority weight port target` (SRV), `flags tag value` (CAA) */
  value: string;
}

export const MAX_RECORDS = 1000;

const LABEL = /^(\*|_?[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?)$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isIpv6(s: string): boolean {
  if (!/^[0-9a-f:]+$/i.test(s) || s.length > 39) return false;
  const double = s.split('::');
  if (double.length > 2) return false;
  const groups = s.split(':').filter((g) => g !== '');
  if (groups.some((g) => g.length > 4)) return false;
  return double.length === 2 ? groups.length <= 7 : groups.length === 8;
}

/** A target host name: absolute (trailing dot) or relative to the zone. */
const isHostName = (s: string) => s === '@' || isDomain(s.replace(/\.$/, '')) || s.split('.').every((l) => LABEL.test(l));

/** The first problem with a record, or null. */
export function recordProblem(r: DnsRecord): string | null {
  if (r.name !== '@' && !r.name.split('.').every((l) => LABEL.test(l))) return `name "${r.name}" is not a valid relative DNS name (use @ for the apex)`;
  if (r.ttl !== undefined && (!Number.isInteger(r.ttl) || r.ttl < 60 || r.ttl > 604_800)) return 'ttl must be a whole number of seconds from 60 to 604800';
  if (/\p{Cc}/u.test(r.value) || r.value.length > 2000) return 'value has control characters or is too long';
  const v = r.value.trim();
  const parts = v.split(/\s+/);
  switch (r.type) {
    case 'A':
      return IPV4.test(v) ? null : 'an A record needs an IPv4 address';
    case 'AAAA':
      return isIpv6(v) ? null : 'an AAAA record needs an IPv6 address';
    case 'CNAME':
    case 'NS':
      return isHostName(v) ? null : `a ${r.type} record needs a host name`;
    case 'MX':
      return parts.length === 2 && /^\d{1,5}$/.test(parts[0]) && Number(parts[0]) <= 65535 && isHostName(parts[1]) ? null : 'an MX record needs "priority host"';
    case 'SRV':
      return parts.length === 4 && parts.slice(0, 3).every((p) => /^\d{1,5}$/.test(p) && Number(p) <= 65535) && isHostName(parts[3]) ? null : 'an SRV record needs "priority weight port target"';
    case 'CAA':
      return /^\d{1,3} (issue|issuewild|iodef) "[^"\\]{0,255}"$/.test(v) && Number(parts[0]) <= 255 ? null : 'a CAA record needs \'flags tag "value"\' (tag issue, issuewild or iodef)';
    case 'TXT':
      return v.length <= 1000 && !/["\\]/.test(v) ? null : 'TXT text is at most 1000 characters without quotes or backslashes';
  }
}

/** Zone-wide rules: a CNAME stands alone at its name, and never at the apex. */
export function zoneProblem(records: DnsRecord[]): string | null {
  if (records.length > MAX_RECORDS) return `at most ${MAX_RECORDS} records`;
  const byName = new Map<string, DnsRecord[]>();
  for (const r of records) byName.set(r.name, [...(byName.get(r.name) ?? []), r]);
  for (const [name, rs] of byName) {
    if (rs.some((r) => r.type === 'CNAME') && (name === '@' || rs.length > 1)) return `a CNAME at "${name}" must be the only record there and not at the apex`;
  }
  return null;
}

/** A zone's SOA serial for a change at `now`: YYYYMMDDnn, always above the previous one. */
export function nextSerial(previous: number | null, now: Date): number {
  const day = Number(now.toISOString().slice(0, 10).replace(/-/g, '')) * 100;
  return previous !== null && previous >= day ? previous + 1 : day;
}

/** The BIND zone file. Text values are quoted in 255-byte strings as BIND expects. */
export function renderZone(zone: string, serial: number, nameservers: string[], records: DnsRecord[]): string {
  const abs = (h: string) => (h.endsWith('.') ? h : `${h}.`);
  const lines = [
    `; zone ${zone}, rendered by the hosting panel; manual edits are overwritten`,
    '$TTL 3600',
    `@ IN SOA ${abs(nameservers[0])} hostmaster.${zone}. ( ${serial} 3600 600 1209600 300 )`,
    ...nameservers.map((ns) => `@ IN NS ${abs(ns)}`),
  ];
  for (const r of records) {
    const value = r.type === 'TXT' ? (r.value.match(/.{1,255}/g) ?? ['']).map((c) => `"${c}"`).join(' ') : r.value.trim();
    lines.push(`${r.name} ${r.ttl ?? ''} IN ${r.type} ${value}`.replace(/ {2,}/g, ' '));
  }
  return lines.join('\n') + '\n';
}
