import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import { acceptInvitation, cancelInvitation, createInvitation, openInvitation, team } from '../../../services/dashboard/invitations';
import { Conflict, NotFound } from '../../../services/shared/errors';
import { csrfField, html, when } from './html';
import { DashboardError, readForm, requireOwner, sessionOfCtx, show } from './http';

// The team page (the account's users and open invitations; owners invite and cancel) and the
// invitation link's page, where the invitee chooses a password. The link is shown once, to the owner.

const problem = (err: unknown): string | null =>
  err instanceof z.ZodError ? err.issues.map((i) => `${i.path.join('.') || 'password'}: ${i.message}`).join('; ') : err instanceof Conflict || err instanceof NotFound ? err.message : null;

export function teamPages(r: Router, d: { db: Db }): void {
  const page = async (ctx: Context, extra: { link?: string; error?: string } = {}, status = 200) => {
    const s = sessionOfCtx(ctx);
    const t = await team(d.db, s.accountId);
    show(
      ctx,
      { title: 'Team', current: 'team' },
      html`${extra.error ? html`<div class="banner error" role="alert">${extra.error}</div>` : ''}
${extra.link ? html`<div class="card" id="new-invitation"><h2>Invitation link</h2><p class="hint">Send it to the invitee: it is shown only this once and works once, for 7 days.</p>
<div class="secret"><code id="invitation-link">${extra.link}</code><button type="button" data-copy="invitation-link">Copy</button></div></div>` : ''}
<h2>Users</h2>
<table id="users"><thead><tr><th>Email</th><th>Role</th><th>Two-factor</th><th>Since</th><th>Last sign-in</th></tr></thead>
<tbody>${t.users.map((u: { email: string; role: string; two_factor: boolean; created_at: Date; last_sign_in_at: Date | null }) => html`<tr><td>${u.email}</td><td>${u.role}</td><td>${u.two_factor ? 'on' : 'off'}</td><td class="nowrap">${when(u.created_at.toISOString())}</td><td class="nowrap">${when(u.last_sign_in_at?.toISOString())}</td></tr>`)}</tbody></table>
<h2>Open invitations</h2>
<table id="invitations"><thead><tr><th>Email</th><th>Role</th><th>Expires</th><th></th></tr></thead>
<tbody>${t.invitations.length === 0 ? html`<tr><td colspan="4">None.</td></tr>` : ''}${t.invitations.map(
        (i: { id: string; email: string; role: string; expires_at: Date }) => html`<tr data-invitation-id="${i.id}"><td>${i.email}</td><td>${i.role}</td><td class="nowrap">${when(i.expires_at.toISOString())}</td>
<td>${s.role === 'owner' ? html`<form method="post" action="/dashboard/team/invitations/${i.id}/cancel">${csrfField(s.csrfToken)}<button class="secondary" type="submit">Cancel</button></form>` : ''}</td></tr>`,
      )}</tbody></table>
${s.role === 'owner'
  ? html`<form class="card" method="post" action="/dashboard/team/invitations" id="invite"><h2>Invite someone</h2>${csrfField(s.csrfToken)}
<div class="grid"><div><label for="invite-email">Email</label><input id="invite-email" name="email" type="email" required></div>
<div><label for="invite-role">Role</label><select id="invite-role" name="role"><option value="member">member (view only)</option><option value="owner">owner (keys, team)</option></select></div></div>
<div class="actions"><button type="submit">Create invitation link</button></div></form>`
  : ''}`,
      status,
    );
  };

  r.get('/team', (ctx) => page(ctx));
  r.post('/team/invitations', async (ctx) => {
    const s = requireOwner(ctx);
    const form: URLSearchParams = ctx.state.form;
    try {
      const inv = await createInvitation(d.db, s.accountId, s.userId, { email: form.get('email') ?? '', role: (form.get('role') ?? '') as never });
      await page(ctx, { link: `${ctx.origin}/dashboard/invite/${inv.token}` }, 201);
    } catch (err) {
      const message = problem(err);
      if (message === null) throw err;
      await page(ctx, { error: message }, 400);
    }
  });
  r.post('/team/invitations/:id/cancel', async (ctx) => {
    const s = requireOwner(ctx);
    await cancelInvitation(d.db, s.accountId, ctx.params.id).catch((err) => {
      throw err instanceof NotFound ? new DashboardError(404, 'There is no such open invitation.') : err;
    });
    ctx.redirect('/dashboard/team');
  });
}

/** The invitation link's page (signed out): choose a password, then sign in. */
export function invitationPages(r: Router, d: { db: Db }, sameOrigin: (ctx: Context) => void): void {
  const form = (ctx: Context, inv: { email: string; role: string }, error?: string, status = 200) =>
    show(
      ctx,
      { title: 'Join the account' },
      html`<div class="signin">${error ? html`<div class="banner error" role="alert">${error}</div>` : ''}
<form class="card" method="post" id="accept"><p>You are invited as <strong>${inv.role}</strong> with <strong>${inv.email}</strong>. Choose a password (at least 10 characters).</p>
<div><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="new-password" minlength="10" required></div>
<button type="submit">Create my sign-in</button></form></div>`,
      status,
    );
  const open = async (ctx: Context) => {
    const inv = await openInvitation(d.db, ctx.params.token);
    if (!inv) throw new DashboardError(404, 'This invitation is used, cancelled or expired; ask the account owner for a new one.');
    return inv;
  };
  r.get('/invite/:token', async (ctx) => {
    ctx.set('referrer-policy', 'no-referrer'); // the token is in the URL
    form(ctx, await open(ctx));
  });
  r.post('/invite/:token', async (ctx) => {
    sameOrigin(ctx);
    const inv = await open(ctx);
    try {
      await acceptInvitation(d.db, ctx.params.token, (await readForm(ctx)).get('password') ?? '');
    } catch (err) {
      const message = problem(err);
      if (message === null) throw err;
      return form(ctx, inv, message, 400);
    }
    ctx.redirect('/dashboard/sign-in?joined=1');
  });
}
