// The console's shell: who is signed in, the branded header and navigation, and the page of the
// address (pages/index.js lists them). Codes that concern the whole session move the browser: not
// signed in → sign-in page; temporary password → password change; two-factor required by role →
// the account page (spec 2 section 5.2).
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, forgetSession, get, onApiError, post } from './lib/api.js';
import { html, Link, navigate, useLocation } from './lib/ui.js';
import { applyBranding } from './lib/branding.js';
import { matchPage, NAV } from './pages/index.js';

const REDIRECTS = {
  unauthenticated: '/sign-in',
  password_change_required: '/account/password',
  two_factor_required: '/account?two-factor=required',
};
onApiError((err) => {
  const to = REDIRECTS[err.code];
  if (to && location.pathname !== to.split('?')[0]) navigate(to);
});

function App() {
  const { path, query } = useLocation();
  const [account, setAccount] = useState(undefined); // undefined: not known yet; null: signed out
  const [branding, setBranding] = useState(null);
  const match = matchPage(path);

  const refresh = async () => {
    try {
      const a = await get('/v1/account');
      setAccount(a);
      const b = await api('GET', `/v1/orgs/${a.org_id}/branding`, undefined, { quiet: true }).then((x) => x.effective, () => null);
      setBranding(b);
      applyBranding(b);
      return a;
    } catch {
      setAccount(null);
      return null;
    }
  };
  useEffect(() => {
    if (match && match.page.bare) setAccount(null);
    else void refresh();
  }, [match && match.page.bare]);

  if (match && match.page.bare) return html`<${match.page.component} params=${match.params} query=${query} refresh=${refresh} />`;
  if (account === undefined) return html`<p class="muted center" aria-busy="true">Loading…</p>`;
  if (account === null) return null; // the sign-in page is on its way
  if (path === '/') {
    navigate(`/orgs/${account.org_id}`, true);
    return null;
  }
  const signOut = async () => {
    await post('/v1/auth/sign-out').catch(() => null);
    forgetSession();
    navigate('/sign-in');
  };
  const nav = NAV.filter((n) => !n.platform || account.org_type === 'platform');
  const Page = match ? match.page.component : NotFound;
  return html`<div class="shell">
    <header class="top">
      <${Link} class="brand" href="/">${branding && branding.display_name ? branding.display_name : 'Hosting panel'}<//>
      <nav aria-label="Main">
        ${nav.map((n) => html`<${Link} href=${n.href(account)} aria-current=${path.startsWith(n.prefix(account)) ? 'page' : undefined}>${n.label}<//>`)}
      </nav>
      <span class="who">${account.login.username} · ${account.login.role}</span>
      <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
    </header>
    <main id="main">
      <${Page} key=${path} params=${match ? match.params : {}} query=${query} account=${account} refresh=${refresh} />
    </main>
    ${branding && branding.support_email ? html`<footer class="muted">Support: <a href=${'mailto:' + branding.support_email}>${branding.support_email}</a></footer>` : null}
  </div>`;
}

function NotFound() {
  return html`<h1>No such page</h1><p><${Link} href="/">Back to the start</${Link}></p>`;
}

render(html`<${App} />`, document.getElementById('app'));
