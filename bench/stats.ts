// Small numeric helpers for the benchmark report.

/** Nearest-rank percentile of unsorted samples; NaN when there are none. */
export function percentile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1];
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => (sorted.length ? sorted[Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length))) - 1] : NaN);
  return { n: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}

/** Milliseconds with 3 decimals, or "n/a". */
export const ms3 = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : 'n/a');
export const fixed = (v: number, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');

export const nsToMs = (ns: bigint) => Number(ns) / 1e6;

/** A markdown table. */
export function table(header: string[], rows: Array<Array<string | number>>): string {
  const line = (cells: Array<string | number>) => `| ${cells.map(String).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** A benchmark knob: the positive number in environment variable `name`, else `fallback`. */
export const num = (name: string, fallback: number) => {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number`);
  return n;
};
