import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import { keysWithUsage, listRequests, requestDetail, requestFilters } from '../../../services/dashboard/reads';
import { normalize } from '../../../domain/credits/pricing';
import { html, when } from './html';
import { DashboardError, sessionOfCtx, show } from './http';

// The requests page: every logged request of the account's keys with its x-request-id, newest
// first, searchable by request id and filtered by key, model, status and UTC days, paginated by
// cursor; and one request with its generation record (tokens, billing source, charge).

const FILTERS = ['id', 'key', 'model', 'status', 'from', 'to', 'limit'] as const;

export function requestPages(r: Router, d: { db: Db }): void {
  r.get('/requests', async (ctx: Context) => {
    const s = sessionOfCtx(ctx);
    const parsed = requestFilters.safeParse(ctx.query);
    if (!parsed.success) throw new DashboardError(400, parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const f = parsed.data;
    const [page, keys] = await Promise.all([listRequests(d.db, s.accountId, f), keysWithUsage(d.db, s.accountId)]);
    const raw = (name: string) => (typeof ctx.query[name] === 'string' ? (ctx.query[name] as string) : '');
    const filtersOnly = () => new URLSearchParams(FILTERS.flatMap((n): [string, string][] => (raw(n) ? [[n, raw(n)]] : [])));
    const next = filtersOnly();
    if (page.next_before) next.set('before', page.next_before);
    show(
      ctx,
      { title: 'Requests', current: 'requests' },
      html`<form class="filters card" method="get" action="/dashboard/requests" id="request-filters">
  <div><label for="f-id">Request id <small>(x-request-id)</small></label><input id="f-id" name="id" class="mono" value="${raw('id')}"></div>
  <div><label for="f-key">Key</label><select id="f-key" name="key"><option value="">all keys</option>${keys.map((k) => html`<option value="${k.id}"${raw('key') === k.id ? html` selected` : ''}>${k.label || k.key_prefix}</option>`)}</select></div>
  <div><label for="f-model">Model</label><input id="f-model" name="model" value="${raw('model')}"></div>
  <div><label for="f-status">Status</label><select id="f-status" name="status">${[['', 'any'], ['ok', 'success'], ['error', 'errors']].map(([v, l]) => html`<option value="${v}"${raw('status') === v ? html` selected` : ''}>${l}</option>`)}</select></div>
  <div><label for="f-from">From</label><input id="f-from" name="from" type="date" value="${raw('from')}"></div>
  <div><label for="f-to">To</label><input id="f-to" name="to" type="date" value="${raw('to')}"></div>
  <div><button type="submit">Filter</button></div>
</form>
<table id="requests">
<thead><tr><th>Time</th><th>Request id</th><th>Key</th><th>Call</th><th>Model</th><th>Status</th><th>Error</th><th class="num">Latency</th><th class="num">Charge</th></tr></thead>
<tbody>${page.data.length === 0 ? html`<tr><td colspan="9">No requests match.</td></tr>` : ''}${page.data.map(
        (q) => html`<tr data-request-id="${q.id}"><td>${when(q.created_at)}</td><td><a class="mono" href="/dashboard/requests/${q.id}">${q.id}</a></td><td>${q.key_label || q.key_prefix}</td><td><code>${q.method} ${q.path}</code></td><td>${q.model ?? '—'}</td>
<td class="${q.status < 400 ? 'ok' : 'bad'}">${q.status}</td><td>${q.error_code ?? ''}</td><td class="num">${q.latency_ms} ms</td><td class="num">${q.pending ? html`<small>held</small> ${q.charge ?? '—'} <small>(pending)</small>` : (q.charge ?? '—')}</td></tr>`,
      )}</tbody></table>
<div class="pager">${f.before ? html`<a class="button secondary" href="/dashboard/requests?${filtersOnly().toString()}">Newest</a>` : ''}${page.next_before ? html`<a class="button secondary" id="older" href="/dashboard/requests?${next.toString()}">Older</a>` : ''}</div>`,
    );
  });

  r.get('/requests/:id', async (ctx: Context) => {
    const s = sessionOfCtx(ctx);
    const found = z.string().uuid().safeParse(ctx.params.id).success ? await requestDetail(d.db, s.accountId, ctx.params.id) : null;
    if (!found) throw new DashboardError(404, 'There is no such request on your account (entries older than the retention are gone).');
    const { request: q, generation: g } = found;
    const amount = (v: string | null | undefined) => (v == null ? '—' : normalize(v));
    show(
      ctx,
      { title: 'Request', current: 'requests' },
      html`<div class="card" id="request-detail"><dl class="facts">
<dt>Request id</dt><dd class="mono">${q.id}</dd><dt>Time</dt><dd>${when(q.created_at)}</dd><dt>Key</dt><dd>${q.key_label || '—'} <code>${q.key_prefix}…</code></dd>
<dt>Call</dt><dd><code>${q.method} ${q.path}</code></dd><dt>Model</dt><dd>${q.model ?? '—'}</dd><dt>Status</dt><dd>${q.status}${q.error_code ? ` · ${q.error_code}` : ''}</dd>
<dt>Latency</dt><dd>${q.latency_ms} ms</dd><dt>Charge</dt><dd>${q.pending ? `held ${q.charge ?? '—'} (pending)` : (q.charge ?? '—')}</dd></dl></div>
<h2>Generation record</h2>
${g
  ? html`<div class="card" id="generation"><dl class="facts">
<dt>Billing</dt><dd>${g.status === 'held' ? 'pending' : `${g.status} · ${g.billing_source ?? '—'}${g.is_estimate ? ' (estimate)' : ''}`}</dd>
<dt>Held</dt><dd>${amount(g.held_credits)}</dd><dt>Charge</dt><dd>${g.status === 'held' ? '—' : amount(g.charge)}</dd>
<dt>Tokens</dt><dd>${g.status === 'held' ? '— (counted at settlement)' : `${g.prompt_tokens ?? 0} in · ${g.completion_tokens ?? 0} out${g.cached_tokens ? ` · ${g.cached_tokens} cached` : ''}${g.reasoning_tokens ? ` · ${g.reasoning_tokens} reasoning` : ''}`}</dd>
<dt>Provider</dt><dd>${g.provider ?? '—'}</dd><dt>Settled</dt><dd>${when(g.settled_at?.toISOString?.() ?? null)}</dd></dl></div>`
  : html`<p class="hint">This request reserved no credits (it was refused before, or is not billable).</p>`}
<p><a href="/dashboard/requests">All requests</a></p>`,
    );
  });
}
