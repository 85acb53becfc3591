// Sign-in (spec 2 section 5): the branding of the login hostname (display name, accent colour,
// support email), username and password, and the two-factor code once the API asks for it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, post } from '../lib/api.js';
import { ErrorBox, Field, html, navigate } from '../lib/ui.js';
import { applyBranding } from '../lib/branding.js';

export function SignInPage() {
  const [branding, setBranding] = useState(null);
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [needCode, setNeedCode] = useState(false);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const codeRef = useRef(null);

  useEffect(() => {
    get(`/v1/branding?hostname=${encodeURIComponent(location.hostname)}`).then((b) => {
      setBranding(b);
      applyBranding(b);
    }, () => null);
  }, []);
  useEffect(() => {
    if (needCode && codeRef.current) codeRef.current.querySelector('input').focus();
  }, [needCode]);

  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await post('/v1/auth/sign-in', { username, password, ...(needCode && code ? { code: code.trim() } : {}) });
      navigate(r.must_change_password ? '/account/password' : '/');
    } catch (err) {
      setBusy(false);
      if (err.code === 'two_factor_code_required') setNeedCode(true);
      setError(err);
    }
  };
  const name = branding && branding.display_name ? branding.display_name : 'Hosting panel';
  return html`<main class="sign-in" id="main">
    <h1>${name}</h1>
    <form onSubmit=${submit} aria-label="Sign in">
      <${Field} label="Username" value=${username} onInput=${setUsername} required autocomplete="username" autofocus />
      <${Field} label="Password" type="password" value=${password} onInput=${setPassword} required autocomplete="current-password" />
      ${needCode
        ? html`<div ref=${codeRef}><${Field} label="Two-factor code" hint="The 6-digit code of your authenticator app, or a recovery code." value=${code} onInput=${setCode} required autocomplete="one-time-code" inputmode="numeric" /></div>`
        : null}
      <${ErrorBox} error=${error} />
      <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
    ${branding && branding.support_email ? html`<p class="muted">Help: <a href=${'mailto:' + branding.support_email}>${branding.support_email}</a></p>` : null}
  </main>`;
}
