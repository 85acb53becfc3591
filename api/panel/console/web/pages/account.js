// The account page (spec 2 sections 2.5, 5): own password, two-factor enrolment (QR code of the
// otpauth URI, recovery codes shown once) and API tokens (shown once). A login that must enrol
// before anything else (-require-2fa-roles) is sent here and told why.
import { useState } from 'preact/hooks';
import { del, get, post, qrDataUrl } from '../lib/api.js';
import { ActionButton, Field, Form, html, Loaded, navigate, Notice, Table, useLoad, when } from '../lib/ui.js';

export function PasswordPage({ account, refresh }) {
  const temporary = account.login.must_change_password;
  return html`<section>
    <h1>${temporary ? 'Choose your password' : 'Change password'}</h1>
    ${temporary ? html`<${Notice} kind="warn">Your password is temporary: choose your own before anything else.<//>` : null}
    <${PasswordForm} done=${async () => {
      await refresh();
      navigate('/');
    }} />
  </section>`;
}

function PasswordForm({ done }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const action = async () => {
    if (next !== again) throw new Error('The two new passwords differ.');
    return post('/v1/account/password', { current_password: current, new_password: next });
  };
  return html`<${Form} label="Change password" submit="Change password" action=${action} done=${done}>
    <${Field} label="Current password" type="password" value=${current} onInput=${setCurrent} required autocomplete="current-password" />
    <${Field} label="New password" type="password" hint="At least 12 characters." value=${next} onInput=${setNext} required autocomplete="new-password" />
    <${Field} label="New password again" type="password" value=${again} onInput=${setAgain} required autocomplete="new-password" />
  <//>`;
}

export function AccountPage({ account, query, refresh }) {
  const [changed, setChanged] = useState(false);
  const l = account.login;
  return html`<section>
    <h1>Account</h1>
    ${query.get('two-factor') === 'required' && !l.two_factor
      ? html`<${Notice} kind="warn">Logins of role ${l.role} must set up two-factor sign-in first: until then only this page (password, two-factor, API tokens) and sign-out work.<//>`
      : null}
    <dl class="facts">
      <dt>Username</dt><dd>${l.username}</dd>
      <dt>Role</dt><dd>${l.role}</dd>
      <dt>Organisation</dt><dd><code>${account.org_id}</code> (${account.org_type})</dd>
      <dt>Powers</dt><dd>${account.powers.length ? account.powers.join(', ') : 'none'}</dd>
      <dt>Password changed</dt><dd>${when(l.password_changed_at)}</dd>
      <dt>Two-factor sign-in</dt><dd>${l.two_factor ? 'on' : 'off'}</dd>
    </dl>
    <h2>Password</h2>
    ${changed ? html`<${Notice}>Password changed.<//>` : null}
    <${PasswordForm} done=${() => setChanged(true)} />
    <h2>Two-factor sign-in</h2>
    <${TwoFactor} on=${l.two_factor} refresh=${refresh} />
    <h2>API tokens</h2>
    <${Tokens} />
  </section>`;
}

function TwoFactor({ on, refresh }) {
  const [enrolment, setEnrolment] = useState(null);
  const [code, setCode] = useState('');
  const [recovery, setRecovery] = useState(null);
  if (recovery) {
    return html`<div class="once" role="region" aria-label="Recovery codes">
      <${Notice}>Two-factor sign-in is on. These recovery codes are shown once: store them now. Each signs in once instead of a code.<//>
      <ul class="codes">${recovery.map((c) => html`<li><code>${c}</code></li>`)}</ul>
    </div>`;
  }
  if (on) return html`<p>On. To remove it, ask the level above you (it is removed by whoever manages your login).</p>`;
  if (!enrolment) {
    const start = async () => {
      const e = await post('/v1/account/two-factor');
      return { ...e, qr: await qrDataUrl(e.otpauth_uri) };
    };
    return html`<p>Off.</p><${ActionButton} action=${start} done=${setEnrolment}>Set up two-factor sign-in<//>`;
  }
  return html`<div>
    <p>Scan this code with an authenticator app, or type the secret into it; then enter the code it shows.</p>
    <img class="qr" src=${enrolment.qr} alt="QR code of the two-factor secret" width="200" height="200" />
    <p>Secret: <code data-testid="totp-secret">${enrolment.secret}</code></p>
    <${Form} label="Confirm two-factor" submit="Turn on two-factor sign-in" action=${() => post('/v1/account/two-factor/confirm', { code: code.trim() })} done=${async (r) => {
      setRecovery(r.recovery_codes);
      await refresh();
    }}>
      <${Field} label="Code from the app" value=${code} onInput=${setCode} required autocomplete="one-time-code" inputmode="numeric" />
    <//>
  </div>`;
}

function Tokens() {
  const tokens = useLoad(() => get('/v1/account/tokens'), []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState(null);
  return html`<div>
    ${created ? html`<${Notice}>Token <strong>${created.name}</strong> (shown once, copy it now): <code data-testid="new-token">${created.token}</code><//>` : null}
    <${Loaded} state=${tokens}>${(d) => html`<${Table} caption="Your API tokens" rows=${d.tokens} empty="No API tokens." cols=${[
      ['Name', (t) => t.name],
      ['Created', (t) => when(t.created_at)],
      ['Last used', (t) => when(t.last_used_at)],
      ['', (t) => html`<${ActionButton} danger action=${() => del(`/v1/account/tokens/${t.id}`)} done=${tokens.reload} confirm=${`Revoke the token "${t.name}"?`}>Revoke<//>`],
    ]} />`}<//>
    <${Form} label="New API token" submit="Create token" action=${() => post('/v1/account/tokens', { name })} done=${(t) => {
      setCreated(t);
      setName('');
      tokens.reload();
    }}>
      <${Field} label="Token name" value=${name} onInput=${setName} required />
    <//>
  </div>`;
}
