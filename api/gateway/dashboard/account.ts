import type Router from '@koa/router';
import type { Context } from 'koa';
import QRCode from 'qrcode';
import type { Db } from '../../../platform/db';
import { changePassword, confirmTotp, disableTotp, hasTotp, pendingTotp, startTotp } from '../../../services/dashboard/account';
import { Conflict, InvalidInput } from '../../../services/shared/errors';
import { csrfField, html, Html } from './html';
import { sessionOfCtx, show } from './http';

// The signed-in user's own page: change the password (other sessions end) and turn TOTP
// two-factor sign-in on (scan the QR code, confirm with a current code) or off (with the password).

export function accountPages(r: Router, d: { db: Db; sealingKey: Buffer }): void {
  const page = async (ctx: Context, extra: { error?: string; notice?: string } = {}, status = 200) => {
    const s = sessionOfCtx(ctx);
    const [on, pending] = await Promise.all([hasTotp(d.db, s.userId), pendingTotp(d.db, d.sealingKey, s.userId, s.email)]);
    const qr = pending ? new Html(await QRCode.toString(pending.uri, { type: 'svg', margin: 1, width: 180 })) : null;
    show(
      ctx,
      { title: 'Your sign-in', current: 'account' },
      html`${extra.error ? html`<div class="banner error" role="alert">${extra.error}</div>` : ''}${extra.notice ? html`<div class="banner notice" role="status">${extra.notice}</div>` : ''}
<form class="card" method="post" action="/dashboard/account/password" id="password-form"><h2>Password</h2>${csrfField(s.csrfToken)}
<div class="grid"><div><label for="current_password">Current password</label><input id="current_password" name="current_password" type="password" autocomplete="current-password" required></div>
<div><label for="new_password">New password</label><input id="new_password" name="new_password" type="password" autocomplete="new-password" placeholder="at least 10 characters" required></div></div>
<div class="actions"><button type="submit">Change password</button></div></form>
<div class="card" id="two-factor"><h2>Two-factor sign-in</h2>
${on
  ? html`<p>On: signing in asks for the code of your authenticator app.</p>
<form method="post" action="/dashboard/account/totp/disable">${csrfField(s.csrfToken)}<div class="grid"><div><label for="disable_password">Password</label><input id="disable_password" name="password" type="password" required></div></div><div class="actions"><button class="danger" type="submit">Turn off</button></div></form>`
  : pending
    ? html`<p>Scan the code with your authenticator app (or enter the key by hand), then confirm with the code it shows.</p>
<div class="qr">${qr}</div><p>Key: <code id="totp-secret">${pending.secret}</code></p>
<form method="post" action="/dashboard/account/totp/confirm">${csrfField(s.csrfToken)}<div class="grid"><div><label for="totp_code">Code</label><input id="totp_code" name="code" inputmode="numeric" pattern="[0-9]{6}" autocomplete="one-time-code" required></div></div><div class="actions"><button type="submit">Confirm</button></div></form>`
    : html`<p>Off.</p><form method="post" action="/dashboard/account/totp">${csrfField(s.csrfToken)}<button type="submit" id="totp-start">Set up</button></form>`}
</div>`,
      status,
    );
  };
  /** Runs a change; a caller's mistake shows on the page with 400. */
  const change = (run: (ctx: Context, form: URLSearchParams) => Promise<string>) => async (ctx: Context) => {
    try {
      await page(ctx, { notice: await run(ctx, ctx.state.form) });
    } catch (err) {
      if (!(err instanceof InvalidInput || err instanceof Conflict)) throw err;
      await page(ctx, { error: err instanceof InvalidInput ? `${err.param.replace('_', ' ')}: ${err.message}` : err.message }, 400);
    }
  };
  r.get('/account', (ctx) => page(ctx));
  r.post(
    '/account/password',
    change(async (ctx, f) => {
      const s = sessionOfCtx(ctx);
      await changePassword(d.db, s.userId, s.sessionId, f.get('current_password') ?? '', f.get('new_password') ?? '');
      return 'Password changed; your other sessions have ended.';
    }),
  );
  r.post(
    '/account/totp',
    change(async (ctx) => {
      const s = sessionOfCtx(ctx);
      await startTotp(d.db, d.sealingKey, s.userId, s.email);
      return 'Scan the code, then confirm.';
    }),
  );
  r.post(
    '/account/totp/confirm',
    change(async (ctx, f) => {
      await confirmTotp(d.db, d.sealingKey, sessionOfCtx(ctx).userId, f.get('code') ?? '');
      return 'Two-factor sign-in is on.';
    }),
  );
  r.post(
    '/account/totp/disable',
    change(async (ctx, f) => {
      await disableTotp(d.db, sessionOfCtx(ctx).userId, f.get('password') ?? '');
      return 'Two-factor sign-in is off.';
    }),
  );
}
