import type Router from '@koa/router';
import type { Context } from 'koa';
import { normalize, sub } from '../../../domain/credits/pricing';
import type { Db } from '../../../platform/db';
import { accountRow, usageBreakdown, type UsageRow } from '../../../services/credits/reads';
import { usageByDayAndModel } from '../../../services/dashboard/reads';
import { html, when, type Html } from './html';
import { sessionOfCtx, show } from './http';

// Usage and balance: the account's credits, reserved and pending (spec 1 2.4), plan and expiry,
// and the settled usage of the last 30 days by UTC day and by model — the same query and window
// as GET /v1/usage without parameters, so the numbers agree.

const DAYS = 30;

// Colours of the models in the chart, in the order of the legend; more models reuse them.
const PALETTE = ['#2356c7', '#e08a1e', '#1f9d74', '#b5398f', '#6b59d3', '#c9453a', '#3b8fb8', '#7d8a2e'];

/** Stacked bars of credits per UTC day (one per day of the window, empty days at 0), one colour per model. */
function dayChart(cells: { day: string; model: string; credits: string }[], from: Date): Html {
  const models = [...new Set(cells.map((c) => c.model))].sort();
  const colour = (m: string) => PALETTE[models.indexOf(m) % PALETTE.length];
  const days = Array.from({ length: DAYS + 1 }, (_, i) => new Date(from.getTime() + i * 86_400_000).toISOString().slice(0, 10));
  const perDay = new Map<string, { model: string; v: number; credits: string }[]>();
  for (const c of cells) perDay.set(c.day, [...(perDay.get(c.day) ?? []), { model: c.model, v: Number(c.credits), credits: normalize(c.credits) }]);
  const dayTotal = (d: string) => (perDay.get(d) ?? []).reduce((s, c) => s + c.v, 0);
  const max = Math.max(0, ...days.map(dayTotal));
  const [W, H, TOP] = [900, 170, 16];
  const slot = W / days.length;
  const bars = days.map((d, i) => {
    let y = TOP + H;
    const stack = (perDay.get(d) ?? []).map((c) => {
      const h = max > 0 ? Math.max(c.v > 0 ? 1 : 0, (c.v / max) * H) : 0;
      y -= h;
      return html`<rect class="bar" fill="${colour(c.model)}" x="${(i * slot + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${(slot - 2).toFixed(1)}" height="${h.toFixed(1)}"><title>${d} · ${c.model}: ${c.credits}</title></rect>`;
    });
    return html`${stack}${i % 5 === 0 ? html`<text x="${(i * slot).toFixed(1)}" y="${TOP + H + 14}">${d.slice(5)}</text>` : ''}`;
  });
  return html`<svg viewBox="0 0 ${W} ${TOP + H + 20}" role="img" aria-label="Credits used per day and model, last ${DAYS} days">
<text x="${W - 2}" y="10" text-anchor="end">highest day ${normalize(String(max))}</text>
<line x1="0" x2="${W}" y1="${TOP + H}" y2="${TOP + H}" stroke="#dde2ea"></line>
${bars}</svg>
<div class="legend">${models.map((m) => html`<span><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="${colour(m)}"></rect></svg> ${m}</span>`)}</div>`;
}

const table = (id: string, name: string, rows: UsageRow[]) =>
  html`<table id="${id}"><thead><tr><th>${name}</th><th class="num">Requests</th><th class="num">Credits</th><th class="num">Prompt tokens</th><th class="num">Completion tokens</th></tr></thead>
<tbody>${rows.length === 0 ? html`<tr><td colspan="5">No settled usage in this window.</td></tr>` : ''}${rows.map((r) => html`<tr><td>${r.key}</td><td class="num">${r.requests}</td><td class="num">${normalize(r.credits)}</td><td class="num">${r.prompt_tokens}</td><td class="num">${r.completion_tokens}</td></tr>`)}</tbody></table>`;

export function usagePage(r: Router, d: { db: Db }): void {
  r.get('/usage', async (ctx: Context) => {
    const s = sessionOfCtx(ctx);
    const to = new Date();
    const from = new Date(to.getTime() - DAYS * 86_400_000);
    const [a, u, cells] = await Promise.all([accountRow(d.db, s.accountId), usageBreakdown(d.db, { accountId: s.accountId, from, to }), usageByDayAndModel(d.db, s.accountId, from, to)]);
    const expired = a.plan_expires_at !== null && a.plan_expires_at.getTime() <= Date.now();
    show(
      ctx,
      { title: 'Usage & balance', current: 'usage' },
      html`<div class="grid" id="balance">
<div class="card"><div class="hint">Remaining credits</div><div class="stat" id="remaining">${normalize(sub(a.total_credits, a.total_usage))}</div><small>of ${normalize(a.total_credits)} granted</small></div>
<div class="card"><div class="hint">Reserved</div><div class="stat" id="reserved">${normalize(a.reserved_credits)}</div><small>${a.pending_requests} pending requests</small></div>
<div class="card"><div class="hint">Plan</div><div class="stat">${a.tier}</div><small class="${expired ? 'bad' : ''}">${a.plan_expires_at ? `${expired ? 'expired' : 'expires'} ${when(a.plan_expires_at.toISOString())}` : 'no expiry'}</small></div>
</div>
<h2>Last ${DAYS} days <small class="hint">(${when(from.toISOString())} – ${when(to.toISOString())}, settled requests)</small></h2>
<div class="card chart" id="usage-chart" data-total-credits="${normalize(u.total.credits)}" data-total-requests="${u.total.requests}">
<div class="grid"><div><div class="hint">Credits used</div><div class="stat" id="total-credits">${normalize(u.total.credits)}</div></div><div><div class="hint">Requests</div><div class="stat" id="total-requests">${u.total.requests}</div></div></div>
${dayChart(cells, from)}</div>
<h2>By model</h2>${table('by-model', 'Model', u.byModel)}
<h2>By day</h2>${table('by-day', 'Day (UTC)', u.byDay)}`,
    );
  });
}
