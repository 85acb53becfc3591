// The platform's sign-in security (spec 2 section 5.2, issue 32): which roles must use two-factor
// sign-in. Read by the platform's logins, set by a platform_admin; every panel process enforces a
// change from its next request, and a login of such a role without two-factor is sent to enrol.
import { useState } from 'preact/hooks';
import { get, put } from '../lib/api.js';
import { Field, Form, html, Loaded, Notice, useLoad, when } from '../lib/ui.js';
import { ClusterNav } from './cluster-nav.js';

export function SecurityPage({ account }) {
  const policy = useLoad(() => get('/v1/platform/two-factor-policy'), []);
  return html`<section>
    <h1>Cluster</h1>
    <${ClusterNav} current="security" />
    <h2>Two-factor sign-in</h2>
    <${Loaded} state=${policy}>${(p) => html`<${PolicyForm} policy=${p} admin=${account.login.role === 'platform_admin'} reload=${policy.reload} />`}<//>
  </section>`;
}

function PolicyForm({ policy, admin, reload }) {
  const [roles, setRoles] = useState(new Set(policy.require_roles));
  const toggle = (r) => (on) => setRoles((cur) => (on ? new Set([...cur, r]) : new Set([...cur].filter((x) => x !== r))));
  return html`<div>
    <p class="muted">Logins of a checked role must enrol an authenticator app before anything else. ${policy.updated_by ? `Last set by ${policy.updated_by} on ${when(policy.updated_at)}.` : 'Never set.'}</p>
    ${admin
      ? html`<${Form} label="Two-factor policy" submit="Save policy" action=${() => put('/v1/platform/two-factor-policy', { require_roles: [...roles] })} done=${reload}>
          ${policy.roles.map((r) => html`<${Field} type="checkbox" label=${r} value=${roles.has(r)} onInput=${toggle(r)} />`)}
        <//>`
      : html`<${Notice}>Required for: ${policy.require_roles.join(', ') || 'no role'}. Only a platform_admin changes it.<//>`}
  </div>`;
}
