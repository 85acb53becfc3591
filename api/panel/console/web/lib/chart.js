// Node metric charts drawn as inline SVG (no chart library): one series of the points of
// GET /v1/cluster/nodes/{node}/metrics over its window, with an optional threshold line and a
// shaded span (an alert's open time). Colours come from console.css classes: the page's CSP allows
// no inline styles, and SVG presentation attributes are not styles.
import { html } from './ui.js';

/** The series a chart can show: API field, title, unit, fixed top of the scale (null: from the data). */
export const SERIES = {
  cpu_percent: { title: 'CPU', unit: '%', max: 100 },
  load1: { title: 'Load (1 min)', unit: '', max: null },
  memory_used_percent: { title: 'Memory in use', unit: '%', max: 100 },
  rootfs_used_percent: { title: 'Root filesystem in use', unit: '%', max: 100 },
};

const W = 600;
const H = 160;
const PAD = { l: 40, r: 8, t: 10, b: 22 };
const fmt = (v, unit) => `${v >= 10 || v === 0 ? Math.round(v) : v.toFixed(2)}${unit ? ' ' + unit : ''}`;
const clock = (t) => new Date(t).toISOString().slice(11, 16);

/** Start and end of a span, clipped to the window; null when it lies outside. */
function clip(span, from, to) {
  if (!span) return null;
  const a = Math.max(from, new Date(span.from).getTime());
  const b = Math.min(to, span.to ? new Date(span.to).getTime() : to);
  return a < b ? [a, b] : null;
}

/**
 * One series over [from, to]; `threshold` draws the rule's line, `span` ({from, to?}) shades an
 * alert's open time. The figure's accessible name says the latest and highest value in words.
 */
export function Chart({ points, series, from, to, threshold, span }) {
  const s = SERIES[series];
  const t0 = new Date(from).getTime();
  const t1 = new Date(to).getTime();
  const pts = points.filter((p) => p[series] !== null && p[series] !== undefined).map((p) => [new Date(p.t).getTime(), Number(p[series])]);
  const peak = pts.reduce((m, [, v]) => Math.max(m, v), 0);
  const top = s.max ?? Math.max(1, Math.ceil(Math.max(peak, threshold ?? 0) * 1.2));
  const x = (t) => PAD.l + ((t - t0) / Math.max(1, t1 - t0)) * (W - PAD.l - PAD.r);
  const y = (v) => PAD.t + (1 - Math.min(v, top) / top) * (H - PAD.t - PAD.b);
  const latest = pts.length ? pts[pts.length - 1][1] : null;
  const words = pts.length ? `${s.title}: latest ${fmt(latest, s.unit)}, highest ${fmt(peak, s.unit)}, ${pts.length} points from ${clock(t0)} to ${clock(t1)} UTC` : `${s.title}: no samples in this window`;
  const shade = clip(span, t0, t1);
  const ticks = [0, 0.5, 1].map((f) => top * f);
  return html`<figure class="chart">
    <figcaption>${s.title} <span class="muted">${latest === null ? 'no samples' : `latest ${fmt(latest, s.unit)}`}</span></figcaption>
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${words} data-series=${series} data-points=${pts.length}>
      ${shade ? html`<rect class="span" x=${x(shade[0])} y=${PAD.t} width=${Math.max(2, x(shade[1]) - x(shade[0]))} height=${H - PAD.t - PAD.b} />` : null}
      ${ticks.map((v) => html`<line class="grid" x1=${PAD.l} x2=${W - PAD.r} y1=${y(v)} y2=${y(v)} /><text class="tick" x=${PAD.l - 4} y=${y(v) + 4} text-anchor="end">${fmt(v, '')}</text>`)}
      <text class="tick" x=${PAD.l} y=${H - 6}>${clock(t0)}</text>
      <text class="tick" x=${W - PAD.r} y=${H - 6} text-anchor="end">${clock(t1)} UTC</text>
      ${threshold !== undefined && threshold !== null ? html`<line class="threshold" x1=${PAD.l} x2=${W - PAD.r} y1=${y(threshold)} y2=${y(threshold)} />` : null}
      ${pts.length > 1 ? html`<polyline class="line" points=${pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ')} />` : null}
      ${pts.length === 1 ? html`<circle class="dot" cx=${x(pts[0][0])} cy=${y(pts[0][1])} r="3" />` : null}
    </svg>
  </figure>`;
}
