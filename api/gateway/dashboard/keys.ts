import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import { catalogModelIds, keysWithUsage } from '../../../services/dashboard/reads';
import type { KeyChangeAcks } from '../../../services/keys/change-acks';
import { createKey, getKey, revokeKey, updateKey, type KeySettingsInput, type KeyView } from '../../../services/keys/keys';
import { InvalidInput, NotFound } from '../../../services/shared/errors';
import { csrfField, html, when, type Html } from './html';
import { DashboardError, requireOwner, sessionOfCtx, show } from './http';

// The keys page: the account's keys with usage windows and status; create (every per-key setting
// of the variant, the full key shown once), edit settings, revoke. Changes go through the key
// services and KeyChangeAcks, so every API process refuses a revoked key on its next request.

interface KeyDeps {
  db: Db;
  acks: KeyChangeAcks;
  variant: 'credits' | 'keyed';
}

const keyed = (d: KeyDeps) => d.variant === 'keyed';

/** A key of the session's account, else 404 (another account's key does not exist for it). */
async function ownKey(ctx: Context, db: Db, id: string): Promise<KeyView> {
  const k = await getKey(db, id).catch((err) => {
    if (err instanceof NotFound || err instanceof z.ZodError) return null;
    throw err;
  });
  if (!k || k.account_id !== sessionOfCtx(ctx).accountId) throw new DashboardError(404, 'There is no such key on your account.');
  return k;
}

/** The per-key settings of a form: empty fields are absent on create and removed (null) on edit. */
function settingsOf(form: URLSearchParams, blank: null | undefined): KeySettingsInput {
  const field = (name: string) => {
    const v = form.get(name)?.trim();
    return v ? v : blank;
  };
  const models = form.getAll('models').filter(Boolean);
  // An expiry left as shown stays as stored (it may be an instant set by the operator, not a day).
  const expiry = form.get('expires_at') === form.get('expires_at_shown') && form.has('expires_at_shown') ? undefined : field('expires_at');
  return { spend_limit: field('spend_limit'), rpm: field('rpm'), expires_at: expiry, models: models.length ? models : blank };
}

/** The day an expiry shows in the form: the last valid day of one set by day, else the instant's day. */
function shownDay(iso: string | null): string {
  if (!iso) return '';
  return (iso.endsWith('T00:00:00.000Z') ? new Date(Date.parse(iso) - 86_400_000).toISOString() : iso).slice(0, 10);
}

/** An expiry as the form set it: a whole UTC day stored as the next midnight reads "through" that day. */
function validThrough(iso: string): string {
  return iso.endsWith('T00:00:00.000Z') ? `through ${new Date(Date.parse(iso) - 86_400_000).toISOString().slice(0, 10)}` : `until ${when(iso)}`;
}

/** A caller's mistake in a form, in words. */
function formError(err: unknown): string | null {
  if (err instanceof z.ZodError) return err.issues.map((i) => `${i.path.join('.') || 'value'}: ${i.message}`).join('; ');
  if (err instanceof InvalidInput) return `${err.param}: ${err.message}`;
  return null;
}

function settingsFields(models: string[], k?: KeyView): Html {
  const chosen = new Set(k?.models ?? []);
  return html`<div><label for="spend_limit">Spend limit <small>(rupiah)</small></label><input id="spend_limit" name="spend_limit" inputmode="decimal" placeholder="no limit" value="${k?.spend_limit ?? ''}"></div>
  <div><label for="rpm">Requests per minute</label><input id="rpm" name="rpm" type="number" min="1" placeholder="no limit" value="${k?.rpm ?? ''}"></div>
  <div><label for="expires_at">Expires after <small>(UTC day)</small></label><input id="expires_at" name="expires_at" type="date" value="${shownDay(k?.expires_at ?? null)}"><input type="hidden" name="expires_at_shown" value="${shownDay(k?.expires_at ?? null)}"></div>
  <div><label for="models">Allowed models <small>(none: all)</small></label><select id="models" name="models" multiple>${models.map((m) => html`<option${chosen.has(m) ? html` selected` : ''}>${m}</option>`)}</select></div>`;
}

export function keyPages(r: Router, d: KeyDeps): void {
  const list = async (ctx: Context, extra: { created?: KeyView & { key: string }; error?: string } = {}, status = 200) => {
    const s = sessionOfCtx(ctx);
    const [keys, models] = await Promise.all([keysWithUsage(d.db, s.accountId), keyed(d) ? catalogModelIds(d.db) : []]);
    show(
      ctx,
      { title: 'API keys', current: 'keys' },
      html`${extra.error ? html`<div class="banner error" role="alert">${extra.error}</div>` : ''}
${extra.created
  ? html`<div class="card" id="new-key"><h2>Your new key “${extra.created.label}”</h2>
  <p class="hint">Copy it now: it is shown only this once.</p>
  <div class="secret"><code id="full-key">${extra.created.key}</code><button type="button" data-copy="full-key">Copy</button></div></div>`
  : ''}
<table id="keys">
<thead><tr><th>Label</th><th>Prefix</th><th>Created</th><th>Last used</th><th class="num">Today</th><th class="num">This week</th><th class="num">This month</th>${keyed(d) ? html`<th>Limits</th>` : ''}<th>Status</th><th></th></tr></thead>
<tbody>${keys.length === 0 ? html`<tr><td colspan="10">No keys yet.</td></tr>` : ''}${keys.map(
        (k) => html`<tr data-key-id="${k.id}">
  <td>${k.label || '—'}</td><td><code>${k.key_prefix}…</code></td><td class="nowrap">${when(k.created_at)}</td><td class="nowrap">${when(k.last_used_at)}</td>
  <td class="num">${k.usage.daily}<br><small>${k.requests.daily} req</small></td><td class="num">${k.usage.weekly}<br><small>${k.requests.weekly} req</small></td><td class="num">${k.usage.monthly}<br><small>${k.requests.monthly} req</small></td>
  ${keyed(d) ? html`<td><small>${k.spend_limit === null ? 'no spend limit' : `spent ${k.spend} of ${k.spend_limit}`}<br>${[k.rpm === null ? '' : `${k.rpm}/min`, k.expires_at ? `valid ${validThrough(k.expires_at)}` : ''].filter(Boolean).join(' · ')}${k.models ? html`<br>${k.models.join(', ')}` : ''}</small></td>` : ''}
  <td class="status-${k.status.replace(' ', '-')}">${k.status}</td>
  <td>${k.status === 'revoked' ? '' : html`<a href="/dashboard/keys/${k.id}">Edit</a>`}</td>
</tr>`,
      )}</tbody></table>
${s.role === 'owner'
  ? html`<form class="card" method="post" action="/dashboard/keys" id="create-key"><h2>Create a key</h2>${csrfField(s.csrfToken)}
<div class="grid"><div><label for="label">Label</label><input id="label" name="label" maxlength="200" placeholder="e.g. production"></div>
${keyed(d) ? settingsFields(models) : html`<div><label for="format">Format</label><select id="format" name="format"><option value="gw_ai">gw_ai_…</option><option value="rk_live">rk_live_…</option></select></div>`}</div>
<div class="actions"><button type="submit">Create key</button></div></form>`
  : ''}`,
      status,
    );
  };

  r.get('/keys', (ctx) => list(ctx));

  r.post('/keys', async (ctx) => {
    const s = requireOwner(ctx);
    const form: URLSearchParams = ctx.state.form;
    try {
      const created = await createKey(d.db, {
        accountId: s.accountId,
        label: z.string().trim().max(200).parse(form.get('label') ?? ''),
        format: keyed(d) ? 'mt' : z.enum(['gw_ai', 'rk_live']).parse(form.get('format') ?? 'gw_ai'),
        settings: keyed(d) ? settingsOf(form, undefined) : {},
      });
      await list(ctx, { created }, 201);
    } catch (err) {
      const message = formError(err);
      if (message === null) throw err;
      await list(ctx, { error: message }, 400);
    }
  });

  const editPage = async (ctx: Context, k: KeyView, error?: string, status = 200) => {
    const s = sessionOfCtx(ctx);
    const models = keyed(d) ? await catalogModelIds(d.db) : [];
    show(
      ctx,
      { title: `Key ${k.label || k.key_prefix}`, current: 'keys' },
      html`${error ? html`<div class="banner error" role="alert">${error}</div>` : ''}
<div class="card"><dl class="facts"><dt>Prefix</dt><dd><code>${k.key_prefix}…</code></dd><dt>Created</dt><dd>${when(k.created_at)}</dd><dt>Status</dt><dd>${k.revoked_at ? `revoked ${when(k.revoked_at)}` : k.limit_reached ? 'limit reached' : 'active'}</dd>${keyed(d) ? html`<dt>Spent</dt><dd>${k.spend}</dd>` : ''}</dl></div>
${s.role === 'owner' && !k.revoked_at
  ? html`<form class="card" method="post" action="/dashboard/keys/${k.id}" id="edit-key"><h2>Settings</h2>${csrfField(s.csrfToken)}
<div class="grid"><div><label for="label">Label</label><input id="label" name="label" maxlength="200" value="${k.label}"></div>${keyed(d) ? settingsFields(models, k) : ''}</div>
<div class="actions"><button type="submit">Save</button><a class="button secondary" href="/dashboard/keys">Cancel</a></div></form>
<form class="card" method="post" action="/dashboard/keys/${k.id}/revoke" id="revoke-key" data-confirm="Revoke this key? Requests with it are refused from now on.">${csrfField(s.csrfToken)}
<h2>Revoke</h2><p class="hint">The key is refused on the very next request, by every gateway process. This cannot be undone.</p><button type="submit" class="danger">Revoke key</button></form>`
  : ''}`,
      status,
    );
  };

  r.get('/keys/:id', async (ctx) => editPage(ctx, await ownKey(ctx, d.db, ctx.params.id)));

  r.post('/keys/:id', async (ctx) => {
    requireOwner(ctx);
    const k = await ownKey(ctx, d.db, ctx.params.id);
    const form: URLSearchParams = ctx.state.form;
    try {
      const label = z.string().trim().max(200).parse(form.get('label') ?? '');
      await d.acks.change(k.id, () => updateKey(d.db, k.id, { label, ...(keyed(d) ? settingsOf(form, null) : {}) }));
      ctx.redirect('/dashboard/keys');
    } catch (err) {
      const message = formError(err);
      if (message === null) throw err;
      await editPage(ctx, k, message, 400);
    }
  });

  r.post('/keys/:id/revoke', async (ctx) => {
    requireOwner(ctx);
    const k = await ownKey(ctx, d.db, ctx.params.id);
    if (!k.revoked_at) await d.acks.change(k.id, () => revokeKey(d.db, k.id));
    ctx.redirect('/dashboard/keys');
  });
}
