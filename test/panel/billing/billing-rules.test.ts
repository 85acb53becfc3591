import assert from 'node:assert/strict';
import { parseCurrency, parsePeriod, parsePrice, parseRateLines, rateUsage, selectRate, type NodeLabels, type RatingPlan } from '../../../domain/panel/billing';
import { PanelError } from '../../../domain/panel/errors';

// The pure billing rules (domain/panel/billing.ts): currencies and their minor units, prices, the
// rate-line parser's line-numbered errors, selector precedence, and rounding once per line.

const refusedWith = (fn: () => unknown, field: string, message: RegExp) =>
  assert.throws(fn, (e: unknown) => e instanceof PanelError && e.code === 'validation_failed' && e.details.field === field && message.test(e.message));

const node = (n: Partial<NodeLabels> & { node: string }): NodeLabels => ({ region: null, physical_region: null, zone: null, cell: null, ...n });

describe('panel: billing rules', () => {
  it('takes ISO 4217 currencies with their minor units and refuses others', () => {
    assert.deepEqual(parseCurrency('eur'), { currency: 'EUR', minorUnits: 2 }, 'a lower-case code is taken, EUR has 2 minor units');
    assert.deepEqual(parseCurrency('JPY'), { currency: 'JPY', minorUnits: 0 }, 'JPY has no minor units');
    assert.deepEqual(parseCurrency('BHD'), { currency: 'BHD', minorUnits: 3 }, 'BHD has 3 minor units');
    for (const bad of ['EURO', 'XYZ', '', 'e u']) refusedWith(() => parseCurrency(bad), 'currency', /ISO 4217/);
  });

  it('takes non-negative decimal prices with at most 6 decimals', () => {
    assert.equal(parsePrice('12.500', 'p'), '12.5', 'a price is normalised without trailing zeros');
    assert.equal(parsePrice(3, 'p'), '3', 'a number price is taken as its decimal string');
    refusedWith(() => parsePrice('-1', 'p'), 'p', /cannot be negative/);
    for (const bad of ['1e3', '1.1234567', 'abc', '', null]) refusedWith(() => parsePrice(bad, 'p'), 'p', /decimal/);
  });

  it('parses rate lines, skipping blanks and comments, with errors naming the line', () => {
    const lines = parseRateLines('# a comment\n\nnode=web-1 3 2 1 # inline\nphysical_region=fra 1 1 1\ncell=c9 0 0 0\ndefault 0.5 0.25 0.125');
    assert.deepEqual(lines.map((l) => [l.line, l.selector, l.website, l.database, l.gib_disk]), [
      [3, { key: 'node', value: 'web-1' }, '3', '2', '1'],
      [4, { key: 'physical_region', value: 'fra' }, '1', '1', '1'],
      [5, { key: 'cell', value: 'c9' }, '0', '0', '0'],
      [6, 'default', '0.5', '0.25', '0.125'],
    ], 'rate lines keep their line numbers; blanks and comments are skipped');
    refusedWith(() => parseRateLines('default 1 1 1\nzone=a 1 1 1 1'), 'rates', /line 2: 5 fields instead of 4/);
    refusedWith(() => parseRateLines('region 1 1 1'), 'rates', /line 1: unknown selector "region"/);
    refusedWith(() => parseRateLines('default 1 x 1'), 'rates', /line 1: price_per_database "x"/);
    refusedWith(() => parseRateLines('zone=a 1 1 1\n\nzone=a 2 2 2'), 'rates', /line 3: selector "zone=a" is already on line 1/);
  });

  it('selects the line naming the node, then the first matching label line, then default', () => {
    const lines = parseRateLines('zone=z1 1 0 0\nregion=eu 2 0 0\nnode=n1 3 0 0\ndefault 4 0 0');
    assert.equal(selectRate(lines, node({ node: 'n1', region: 'eu', zone: 'z1' }))!.website, '3', 'the line naming the node wins over label lines');
    assert.equal(selectRate(lines, node({ node: 'n2', region: 'eu', zone: 'z1' }))!.website, '1', 'without a node line, the first matching label line (zone) is taken');
    assert.equal(selectRate(lines, node({ node: 'n2', region: 'eu' }))!.website, '2', 'the region line matches when no zone line does');
    assert.equal(selectRate(lines, node({ node: 'n2', region: 'us' }))!.website, '4', 'no label matches: the default line');
    assert.equal(selectRate(parseRateLines('zone=z1 1 0 0'), node({ node: 'n2' })), null, 'no match and no default line: no rate');
  });

  it('rates pro rata over the month and rounds once per line to the minor unit', () => {
    const plan: RatingPlan = { id: 'p', name: 'P', currency: 'JPY', minorUnits: 0, basePrice: '1000', accountPrice: '100', packagePrices: { k: '300' }, rates: parseRateLines('default 10 5 1') };
    const r = rateUsage([{ planId: 'p', hours: 1, accountHours: { '': 1, k: 2 }, nodes: [{ ...node({ node: 'n' }), siteHours: 3, databaseHours: 0, diskMbHours: 1536 }] }], new Map([['p', plan]]), 720);
    // 1000/720 = 1.39 → 1; 100/720 → 0; 2×300/720 = 0.83 → 1; 3×10/720 → 0; 1.5×1/720 → 0
    assert.deepEqual(r.lines.map((l) => [l.kind, l.detail, l.amount]), [
      ['base', 'per organisation', '1'],
      ['accounts', 'per customer account', '0'],
      ['accounts', 'package k', '1'],
      ['websites', 'default', '0'],
      ['disk', 'default', '0'],
    ], 'each line is rated pro rata and rounded once to whole yen');
    assert.deepEqual(r.totals, { JPY: '2' }, 'the total is the sum of the rounded lines');
  });

  it('issue 34: a 6-field rate line prices CPU-hours and memory GiB-hours per unit used, exactly, from integer counters', () => {
    const [line] = parseRateLines('default 0 0 0 0.36 0.5');
    assert.deepEqual([line.cpu_hour, line.gib_memory_hour], ['0.36', '0.5'], 'the usage prices');
    refusedWith(() => parseRateLines('default 1 2 3 4'), 'rates', /5 fields instead of 4 or 6/);
    const plan: RatingPlan = { id: 'p', name: 'P', currency: 'EUR', minorUnits: 2, basePrice: '0', accountPrice: '0', packagePrices: {}, rates: [line] };
    // 12,345,678,901 µs = 3.429355250277… CPU-hours × 0.36 = 1.2345678901 → 1.23; 3 GiB-hours × 0.5 = 1.50
    const usage = [{ planId: 'p', hours: 1, accountHours: {}, nodes: [{ ...node({ node: 'n' }), siteHours: 1, databaseHours: 0, diskMbHours: 0, cpuUs: '12345678901', memoryPeakByteHours: String(3 * 1024 ** 3) }] }];
    const r = rateUsage(usage, new Map([['p', plan]]), 720);
    const byKind = Object.fromEntries(r.lines.map((l) => [l.kind, l]));
    assert.equal(byKind.cpu.amount, '1.23', 'CPU priced per CPU-hour, not pro rata');
    assert.equal(byKind.memory.amount, '1.50', 'memory priced per GiB-hour');
    assert.equal(byKind.memory.quantity_hours, '3', 'GiB-hours');
    const fourFields: RatingPlan = { ...plan, rates: parseRateLines('default 0 0 0') };
    assert.deepEqual(rateUsage(usage, new Map([['p', fourFields]]), 720).lines.map((l) => l.kind).filter((k) => k === 'cpu' || k === 'memory'), [], 'a line without usage prices bills no usage');
  });

  it('reads periods YYYY-MM with their hours', () => {
    assert.deepEqual(parsePeriod('2030-02').hours, 672, 'February 2030 has 28 days of hours');
    assert.deepEqual(parsePeriod('2032-02').hours, 696, 'February 2032, a leap year, has 29 days of hours');
    for (const bad of ['2030-00', '2030-2', '30-02', 7]) refusedWith(() => parsePeriod(bad), 'period', /YYYY-MM/);
  });
});
