import Decimal from 'decimal.js';
import { invalid } from './errors';

// Billing plans and statements (spec 2 sections 2.8, 3; PANEL.md section 3): pure rules. Money is
// exact (decimal.js over decimal strings); prices are per month and charged pro rata for the
// metered hours of the month; a statement line is rounded once, to the currency's minor unit.

export const SELECTOR_KEYS = ['node', 'region', 'physical_region', 'zone', 'cell'] as const;
export type SelectorKey = (typeof SELECTOR_KEYS)[number];

export interface RateLine {
  /** the line number in the plan's rate text (1-based), shown in statements and errors */
  line: number;
  selector: { key: SelectorKey; value: string } | 'default';
  website: string;
  database: string;
  gib_disk: string;
  /** usage priced per unit, not per month (absent on lines written before: 0): a CPU-hour (3600 CPU seconds of a site's group) */
  cpu_hour?: string;
  /** a GiB-hour of a site's memory peak (each hour's peak counts for that hour) */
  gib_memory_hour?: string;
}

/** Where a site or database runs: the node and its labels, as metered. */
export interface NodeLabels {
  node: string;
  region: string | null;
  physical_region: string | null;
  zone: string | null;
  cell: string | null;
}

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** The ISO 4217 code upper-cased and its minor unit (digits after the point), or a 400 naming `currency`. */
export function parseCurrency(code: string): { currency: string; minorUnits: number } {
  const currency = code.trim().toUpperCase();
  if (!/^[A-Z]{3}$/.test(currency) || !CURRENCIES.has(currency)) throw invalid('currency', `"${code}" is not an ISO 4217 currency code (such as EUR, USD, JPY)`);
  return { currency, minorUnits: new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2 };
}

const PRICE = /^\d{1,12}(\.\d{1,6})?$/;

/** A price: a non-negative decimal with at most 6 decimals, as a canonical string; else a 400 naming `field`. */
export function parsePrice(value: unknown, field: string): string {
  const text = typeof value === 'number' ? String(value) : value;
  if (typeof text !== 'string' || !PRICE.test(text.trim())) {
    const negative = typeof text === 'string' && text.trim().startsWith('-');
    throw invalid(field, negative ? 'a price cannot be negative' : 'a price is a decimal such as "12.50" (at most 6 decimals)');
  }
  return new Decimal(text.trim()).toFixed();
}

/**
 * The rate lines of a plan: one per line `<selector> <price_per_website> <price_per_database>
 * <price_per_GiB_disk> [<price_per_CPU_hour> <price_per_GiB_memory_hour>]` (the first three per
 * month, the last two per unit used); blank lines and `#` comments are skipped. Errors name the line.
 */
export function parseRateLines(text: string): RateLine[] {
  const lines: RateLine[] = [];
  const seen = new Map<string, number>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    const body = raw.replace(/#.*$/, '').trim();
    if (!body) return;
    const bad = (why: string) => invalid('rates', `line ${line}: ${why} (expected "<selector> <price_per_website> <price_per_database> <price_per_GiB_disk> [<price_per_CPU_hour> <price_per_GiB_memory_hour>]", selector one of default, ${SELECTOR_KEYS.map((k) => `${k}=…`).join(', ')})`);
    const parts = body.split(/\s+/);
    if (parts.length !== 4 && parts.length !== 6) throw bad(`${parts.length} fields instead of 4 or 6`);
    const [sel, ...prices] = parts;
    let selector: RateLine['selector'];
    if (sel === 'default') selector = 'default';
    else {
      const m = /^([a-z_]+)=(\S+)$/.exec(sel);
      if (!m || !(SELECTOR_KEYS as readonly string[]).includes(m[1])) throw bad(`unknown selector "${sel}"`);
      selector = { key: m[1] as SelectorKey, value: m[2] };
    }
    const key = selector === 'default' ? 'default' : `${selector.key}=${selector.value}`;
    if (seen.has(key)) throw bad(`selector "${key}" is already on line ${seen.get(key)}`);
    seen.set(key, line);
    const [website, database, gib, cpu, memory] = prices.map((p, k) => {
      try {
        return parsePrice(p, 'rates');
      } catch {
        throw bad(`${['price_per_website', 'price_per_database', 'price_per_GiB_disk', 'price_per_CPU_hour', 'price_per_GiB_memory_hour'][k]} "${p}" is not a non-negative decimal (at most 6 decimals)`);
      }
    });
    lines.push({ line, selector, website, database, gib_disk: gib, ...(cpu === undefined ? {} : { cpu_hour: cpu, gib_memory_hour: memory }) });
  });
  return lines;
}

const labelOf = (n: NodeLabels, key: SelectorKey): string | null => (key === 'node' ? n.node : n[key]);

/** The line that rates a node: the one naming the node, else the first matching label line, else `default`; null if none. */
export function selectRate(lines: RateLine[], n: NodeLabels): RateLine | null {
  const labelled = lines.filter((l) => l.selector !== 'default');
  return (
    labelled.find((l) => l.selector !== 'default' && l.selector.key === 'node' && l.selector.value === n.node) ??
    labelled.find((l) => l.selector !== 'default' && l.selector.key !== 'node' && labelOf(n, l.selector.key) === l.selector.value) ??
    lines.find((l) => l.selector === 'default') ??
    null
  );
}

export const selectorText = (l: RateLine | null): string => (l === null ? 'no rate line' : l.selector === 'default' ? 'default' : `${l.selector.key}=${l.selector.value}`);

/** A billing period `YYYY-MM`, or a 400 naming `period`. */
export function parsePeriod(period: unknown): { period: string; start: Date; end: Date; hours: number } {
  const m = typeof period === 'string' ? /^(\d{4})-(0[1-9]|1[0-2])$/.exec(period) : null;
  if (!m) throw invalid('period', 'a month in the form YYYY-MM, such as 2026-11');
  const start = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1));
  const end = new Date(Date.UTC(Number(m[1]), Number(m[2]), 1));
  return { period: m[0], start, end, hours: (end.getTime() - start.getTime()) / 3_600_000 };
}

export const periodOf = (d: Date): string => d.toISOString().slice(0, 7);
/** The start of the hour `d` lies in (UTC). */
export const hourOf = (d: Date): Date => new Date(Math.floor(d.getTime() / 3_600_000) * 3_600_000);
/** `YYYY-MM-DDTHH`, the metered hour's name (workflow id `meter-<YYYY-MM-DDTHH>`). */
export const hourName = (hour: Date): string => hour.toISOString().slice(0, 13);

/** A plan as rating needs it. */
export interface RatingPlan {
  id: string;
  name: string;
  currency: string;
  minorUnits: number;
  basePrice: string;
  accountPrice: string;
  /** package id → price per account on that package, instead of the account price */
  packagePrices: Record<string, string>;
  rates: RateLine[];
}

const CPU_US_PER_HOUR = 3_600_000_000;
const BYTES_PER_GIB = 1024 ** 3;

/** Metered hours of one org under one plan in one month, summed. */
export interface PlanUsage {
  planId: string;
  hours: number;
  /** account-hours per package (key '' = accounts without a package) */
  accountHours: Record<string, number>;
  /**
   * site-hours, database-hours and allocated MiB-hours per node (with its labels as metered); the
   * sites' CPU microseconds and memory peak byte-hours (integers, as decimal strings: they outgrow 2^53)
   */
  nodes: Array<NodeLabels & { siteHours: number; databaseHours: number; diskMbHours: number; cpuUs?: string; memoryPeakByteHours?: string }>;
}

export interface StatementLine {
  plan_id: string;
  plan: string;
  currency: string;
  kind: 'base' | 'accounts' | 'websites' | 'databases' | 'disk' | 'cpu' | 'memory';
  /** what the line charges: the package of the accounts, or the rate line's selector */
  detail: string;
  /** the metered quantity in units × hours (GiB-hours for disk and memory, CPU-hours for cpu) */
  quantity_hours: string;
  unit_price: string;
  amount: string;
}

/**
 * Rates the usage of one org in a month of `monthHours` hours: each (plan, kind, detail) gives one
 * line = Σ quantity-hours × monthly price / monthHours, rounded once (half up) to the currency.
 */
export function rateUsage(usage: PlanUsage[], plans: Map<string, RatingPlan>, monthHours: number): { lines: StatementLine[]; totals: Record<string, string> } {
  const lines: StatementLine[] = [];
  const minor = new Map<string, number>();
  for (const u of usage) {
    const plan = plans.get(u.planId);
    if (!plan) continue;
    minor.set(plan.currency, plan.minorUnits);
    // monthly prices are charged pro rata for the hours; usage prices (cpu, memory) per unit used
    // (`unit`: raw integers per unit, divided once with the price, so the amount stays exact)
    const add = (kind: StatementLine['kind'], detail: string, quantityHours: Decimal, price: string, usage?: { unit: number }) => {
      lines.push({
        plan_id: plan.id,
        plan: plan.name,
        currency: plan.currency,
        kind,
        detail,
        quantity_hours: usage ? quantityHours.dividedBy(usage.unit).toFixed() : quantityHours.toFixed(),
        unit_price: price,
        amount: quantityHours.times(price).dividedBy(usage ? usage.unit : monthHours).toFixed(plan.minorUnits, Decimal.ROUND_HALF_UP),
      });
    };
    add('base', 'per organisation', new Decimal(u.hours), plan.basePrice);
    // accounts on a package the plan has no price for are charged the account price, on one line
    const accounts = new Map<string, { hours: Decimal; price: string }>();
    for (const [pkg, hours] of Object.entries(u.accountHours).sort()) {
      const packaged = pkg !== '' && plan.packagePrices[pkg] !== undefined;
      const detail = packaged ? `package ${pkg}` : 'per customer account';
      const acc = accounts.get(detail) ?? { hours: new Decimal(0), price: packaged ? plan.packagePrices[pkg] : plan.accountPrice };
      accounts.set(detail, { ...acc, hours: acc.hours.plus(hours) });
    }
    for (const [detail, a] of accounts) add('accounts', detail, a.hours, a.price);
    // nodes rated by the same rate line make one line per kind
    const byLine = new Map<string, { rate: RateLine | null; site: Decimal; db: Decimal; gib: Decimal; cpuUs: Decimal; memByteHours: Decimal }>();
    for (const n of u.nodes) {
      const rate = selectRate(plan.rates, n);
      const key = selectorText(rate);
      const acc = byLine.get(key) ?? { rate, site: new Decimal(0), db: new Decimal(0), gib: new Decimal(0), cpuUs: new Decimal(0), memByteHours: new Decimal(0) };
      acc.site = acc.site.plus(n.siteHours);
      acc.db = acc.db.plus(n.databaseHours);
      acc.gib = acc.gib.plus(new Decimal(n.diskMbHours).dividedBy(1024));
      acc.cpuUs = acc.cpuUs.plus(n.cpuUs ?? 0);
      acc.memByteHours = acc.memByteHours.plus(n.memoryPeakByteHours ?? 0);
      byLine.set(key, acc);
    }
    for (const [key, a] of byLine) {
      if (!a.site.isZero()) add('websites', key, a.site, a.rate?.website ?? '0');
      if (!a.db.isZero()) add('databases', key, a.db, a.rate?.database ?? '0');
      if (!a.gib.isZero()) add('disk', key, a.gib, a.rate?.gib_disk ?? '0');
      // usage lines only where the rate line prices them: a plan of 4-field lines bills no usage
      if (a.rate?.cpu_hour !== undefined && !a.cpuUs.isZero()) add('cpu', key, a.cpuUs, a.rate.cpu_hour, { unit: CPU_US_PER_HOUR });
      if (a.rate?.gib_memory_hour !== undefined && !a.memByteHours.isZero()) add('memory', key, a.memByteHours, a.rate.gib_memory_hour, { unit: BYTES_PER_GIB });
    }
  }
  // a plan change to another currency mid-month: one total per currency, never mixed
  const totals: Record<string, string> = {};
  for (const [currency, digits] of minor) totals[currency] = sum(lines.filter((l) => l.currency === currency).map((l) => l.amount), digits);
  return { lines, totals };
}

/** a − b as a decimal string with `minor` decimals (a reseller's margin). */
export const subtract = (a: string, b: string, minor: number): string => new Decimal(a).minus(b).toFixed(minor);
export const sum = (xs: string[], minor: number): string => xs.reduce((s, x) => s.plus(x), new Decimal(0)).toFixed(minor);

const csvCell = (v: unknown): string => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};
/** RFC 4180 CSV: a header row and one row per record. */
export const toCsv = (header: string[], rows: unknown[][]): string => [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';
