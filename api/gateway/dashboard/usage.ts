import type Router from '@koa/router';
import type { Context } from 'koa';
import { normalize, sub } from '../../../domain/credits/pricing';
import type { Db } from '../../../platform/db';
import { accountRow, usageBreakdown, type UsageRow } from '../../../services/credits/reads';
import { html, when, type Html } from './html';
import { sessionOfCtx, show } from './http';

// Usage and balance: the account's credits, reserved and pending (spec 1 2.4), plan and expiry,
// and the settled usage of the last 30 days by UTC day and by model — the same query and window
// as GET /v1/usage without parameters, so the numbers agree.

const DAYS = 30;

/** Bars of credits per UTC day, one per day of the window (days without usage at 0). */
function dayChart(byDay: UsageRow[], from: Date): Html {
  const credits = new Map(byDay.map((r) => [r.key as string, Number(r.credits)]));
  const days = Array.from({ length: DAYS + 1 }, (_, i) => new Date(from.getTime() + i * 86_400_000).toISOString().slice(0, 10));
  const max = Math.max(...days.map((dd) => credits.get(dd) ?? 0), 0);
  const W = 900;
  const H = 180;
  const slot = W / days.length;
  return html`<svg viewBox="0 0 ${W} ${H + 20}" role="img" aria-label="Credits used per day, last ${DAYS} days">
${days.map((dd, i) => {
  const v = credits.get(dd) ?? 0;
  const h = max > 0 ? Math.max(v > 0 ? 1 : 0, (v / max) * H) : 0;
  return html`<rect class="bar" x="${(i * slot + 1).toFixed(1)}" y="${(H - h).toFixed(1)}" width="${(slot - 2).toFixed(1)}" height="${h.toFixed(1)}"><title>${dd}: ${normalize(String(v))}</title></rect>${i % 5 === 0 ? html`<text x="${(i * slot).toFixed(1)}" y="${H + 14}">${dd.slice(5)}</text>` : ''}`;
})}
<text x="${W - 4}" y="12" text-anchor="end">max ${normalize(String(max))} / day</text>
</svg>`;
}

const table = (id: string, name: string, rows: UsageRow[]) =>
  html`<table id="${id}"><thead><tr><th>${name}</th><th class="num">Requests</th><th class="num">Credits</th><th class="num">Prompt tokens</th><th class="num">Completion tokens</th></tr></thead>
<tbody>${rows.length === 0 ? html`<tr><td colspan="5">No settled usage in this window.</td></tr>` : ''}${rows.map((r) => html`<tr><td>${r.key}</td><td class="num">${r.requests}</td><td class="num">${normalize(r.credits)}</td><td class="num">${r.prompt_tokens}</td><td class="num">${r.completion_tokens}</td></tr>`)}</tbody></table>`;

export function usagePage(r: Router, d: { db: Db }): void {
  r.get('/usage', async (ctx: Context) => {
    const s = sessionOfCtx(ctx);
    const to = new Date();
    const from = new Date(to.getTime() - DAYS * 86_400_000);
    const [a, u] = await Promise.all([accountRow(d.db, s.accountId), usageBreakdown(d.db, { accountId: s.accountId, from, to })]);
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
${dayChart(u.byDay, from)}</div>
<h2>By model</h2>${table('by-model', 'Model', u.byModel)}
<h2>By day</h2>${table('by-day', 'Day (UTC)', u.byDay)}`,
    );
  });
}
