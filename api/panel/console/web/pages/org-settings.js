// An org's settings tabs (spec 2 sections 2.1-2.5, 2.7): logins, packages, limits (package or
// custom), usage (accounts at ≥ 80 % first), branding and delegated powers.
import { useState } from 'preact/hooks';
import { del, get, post, put } from '../lib/api.js';
import { LIMIT_LABELS, LimitInputs, numbers } from '../lib/limits.js';
import { ActionButton, dash, Field, Form, html, Link, Loaded, Notice, Select, Table, useLoad, when } from '../lib/ui.js';

const ROLES = ['provider_admin', 'reseller', 'account_owner', 'read_only'];

export function LoginsTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/logins`), [org.id]);
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState('');
  const [reset, setReset] = useState({});
  return html`<div>
    <h2>Logins</h2>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption=${`Logins of ${org.name}`} rows=${d.logins} cols=${[
      ['Username', (l) => l.username],
      ['Role', (l) => l.role],
      ['Status', (l) => html`<span class=${'badge ' + l.status}>${l.status}</span>`],
      ['Password age', (l) => `${l.password_age_days} days${l.must_change_password ? ' (temporary)' : ''}`],
      ['Two-factor', (l) => (l.two_factor ? 'on' : 'off')],
      ['Last sign-in', (l) => when(l.last_sign_in_at)],
      ['', (l) => html`<div class="row-actions">
        ${l.status === 'active'
          ? html`<${ActionButton} action=${() => post(`/v1/logins/${l.id}/suspend`)} done=${list.reload}>Suspend<//>`
          : html`<${ActionButton} action=${() => post(`/v1/logins/${l.id}/reactivate`)} done=${list.reload}>Reactivate<//>`}
        ${l.two_factor ? html`<${ActionButton} action=${() => del(`/v1/logins/${l.id}/two-factor`)} done=${list.reload} confirm=${`Remove two-factor of ${l.username}? Its sessions end.`}>Remove two-factor<//>` : null}
        <details><summary>Reset password</summary>
          <${Form} label=${`Reset password of ${l.username}`} submit="Reset password" action=${() => post(`/v1/logins/${l.id}/reset-password`, { password: reset[l.id] || '' })} done=${list.reload}>
            <${Field} label=${`New temporary password for ${l.username}`} type="password" value=${reset[l.id] || ''} onInput=${(v) => setReset({ ...reset, [l.id]: v })} autocomplete="new-password" />
          <//>
        </details>
        <${ActionButton} danger action=${() => del(`/v1/logins/${l.id}`)} done=${list.reload} confirm=${`Delete the login ${l.username}?`}>Delete<//>
      </div>`],
    ]} />`}<//>
    <h3>Add a login</h3>
    <${Form} label="Add login" submit="Add login" action=${() => post(`/v1/orgs/${org.id}/logins`, { username, password, ...(role ? { role } : {}) })} done=${() => {
      setUsername('');
      setPassword('');
      list.reload();
    }}>
      <${Field} label="Username" value=${username} onInput=${setUsername} required autocomplete="off" />
      <${Field} label="Initial password" type="password" hint="Changed at first sign-in." value=${password} onInput=${setPassword} required autocomplete="new-password" />
      <${Select} label="Role" value=${role} onInput=${setRole} options=${[{ value: '', label: 'the org type’s default' }, ...ROLES.map((r) => ({ value: r, label: r }))]} />
    <//>
  </div>`;
}

export function PackagesTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/packages`), [org.id]);
  const [name, setName] = useState('');
  const [limits, setLimits] = useState({});
  return html`<div>
    <h2>Packages</h2>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Packages listed to this organisation" rows=${d.packages} cols=${[
      ['Name', (p) => p.name],
      ['Owner', (p) => (p.owner_org_id === org.id ? 'this organisation' : html`<${Link} href=${`/orgs/${p.owner_org_id}`}>a level above<//>`)],
      ['Limits', (p) => Object.entries(p.limits).map(([k, v]) => `${LIMIT_LABELS[k] || k}: ${v}`).join(', ') || 'inherits all'],
      ['Accounts using it', (p) => dash(p.orgs_using)],
      ['', (p) => (p.owner_org_id === org.id ? html`<${ActionButton} danger action=${() => del(`/v1/packages/${p.id}`)} done=${list.reload} confirm=${`Delete the package ${p.name}?`}>Delete<//>` : null)],
    ]} />`}<//>
    <h3>New package</h3>
    <${Form} label="New package" submit="Create package" action=${() => post(`/v1/orgs/${org.id}/packages`, { name, limits: numbers(limits) })} done=${() => {
      setName('');
      setLimits({});
      list.reload();
    }}>
      <${Field} label="Package name" value=${name} onInput=${setName} required maxlength="80" />
      <${LimitInputs} limits=${limits} setLimits=${setLimits} />
    <//>
  </div>`;
}

export function LimitsTab({ org, account, reload }) {
  const own = org.limits.own || {};
  const [limits, setLimits] = useState(Object.fromEntries(Object.entries(own).map(([k, v]) => [k, String(v)])));
  const [packageId, setPackageId] = useState(org.package_id || '');
  const packages = useLoad(() => (org.parent_id ? get(`/v1/orgs/${org.parent_id}/packages`) : Promise.resolve({ packages: [] })), [org.parent_id]);
  const mine = org.id === account.org_id;
  return html`<div>
    <h2>Limits</h2>
    <p>Source: <strong>${org.limits.source === 'package' ? 'package' : 'custom limits'}</strong>. The tightest value on this organisation or any level above is in force.</p>
    <${Table} caption="Limits in force" rows=${Object.entries(org.limits.effective).filter(([k]) => k in LIMIT_LABELS)} cols=${[
      ['Limit', ([k]) => LIMIT_LABELS[k] || k],
      ['Set here', ([k]) => dash(own[k])],
      ['In force', ([, v]) => (v.value === null ? 'no limit' : v.value)],
      ['Set by', ([, v]) => (v.set_by ? html`<${Link} href=${`/orgs/${v.set_by}`}>${v.set_by === org.id ? 'this organisation' : 'a level above'}<//>` : '—')],
      ['Used', ([k]) => dash(org.counts[k])],
    ]} />
    ${mine
      ? html`<p class="muted">Your own limits are set by the level above.</p>`
      : html`<h3>Package</h3>
        <${Loaded} state=${packages}>${(d) => html`<${Form} label="Assign package" submit="Assign" action=${() => put(`/v1/orgs/${org.id}/package`, { package_id: packageId || null })} done=${reload}>
          <${Select} label="Package" value=${packageId} onInput=${setPackageId} options=${[{ value: '', label: 'none (custom limits)' }, ...d.packages.map((p) => ({ value: p.id, label: p.name }))]} />
        <//>`}<//>
        <h3>Custom limits</h3>
        <p class="muted">Setting limits by hand detaches the account from its package.</p>
        <${Form} label="Custom limits" submit="Save limits" action=${() => put(`/v1/orgs/${org.id}/limits`, { limits: numbers(limits) })} done=${reload}>
          <${LimitInputs} limits=${limits} setLimits=${setLimits} />
        <//>`}
  </div>`;
}

const pct = (x) => (x.percent === null ? '—' : `${x.percent} %`);
const usageCell = (x, unit) => html`${x.used === null ? '—' : `${x.used} ${unit}`} / ${x.limit === null ? 'no limit' : `${x.limit} ${unit}`} <span class="muted">(${pct(x)})</span>`;

export function UsageTab({ org }) {
  const usage = useLoad(() => get(`/v1/orgs/${org.id}/usage`), [org.id]);
  return html`<div>
    <h2>Usage</h2>
    <${Loaded} state=${usage}>${(u) => html`
      <p class="muted">Accounts at or above ${u.warn_percent} % of a limit come first.</p>
      <${Table} caption="Customer accounts" rows=${u.accounts} rowClass=${(a) => a.level} cols=${[
        ['Account', (a) => html`<${Link} href=${`/orgs/${a.org_id}`}>${a.name}<//>`],
        ['Level', (a) => html`<span class=${'badge ' + a.level}>${a.level.replace('_', ' ')}</span>`],
        ['Websites', (a) => a.sites],
        ['Disk', (a) => usageCell(a.disk_mb, 'MB')],
        ['Files', (a) => usageCell(a.inodes, '')],
        ['Memory', (a) => usageCell(a.memory_mb, 'MB')],
        ['Measured', (a) => when(a.measured_at)],
      ]} />
      <p class="muted">${u.memory.note}</p>
      <p class="muted">${u.disk_note}</p>`}<//>
  </div>`;
}

const BRANDING = [
  ['display_name', 'Display name', 'text', 'Shown in the console and on the sign-in page.'],
  ['accent_color', 'Accent colour', 'text', '#rrggbb'],
  ['support_email', 'Support email', 'email', ''],
  ['login_hostname', 'Login hostname', 'text', 'Optional: the sign-in page on that host shows this branding.'],
];

export function BrandingTab({ org }) {
  const state = useLoad(() => get(`/v1/orgs/${org.id}/branding`), [org.id]);
  return html`<div><h2>Branding</h2><${Loaded} state=${state}>${(b) => html`<${BrandingForm} org=${org} b=${b} reload=${state.reload} />`}<//></div>`;
}

function BrandingForm({ org, b, reload }) {
  const [v, setV] = useState(Object.fromEntries(BRANDING.map(([k]) => [k, b.own[k] || ''])));
  const [saved, setSaved] = useState(false);
  const body = () => Object.fromEntries(BRANDING.map(([k]) => [k, v[k].trim() === '' ? null : v[k].trim()]));
  return html`<div>
    <p class="muted">Empty fields inherit from above. In force now: ${BRANDING.map(([k, label]) => `${label}: ${dash(b.effective[k])}`).join(' · ')}</p>
    ${saved ? html`<${Notice}>Branding saved.<//>` : null}
    <${Form} label="Branding" submit="Save branding" action=${() => put(`/v1/orgs/${org.id}/branding`, body())} done=${() => {
      setSaved(true);
      reload();
    }}>
      ${BRANDING.map(([k, label, type, hint]) => html`<${Field} label=${label} type=${type} hint=${hint} value=${v[k]} onInput=${(x) => setV({ ...v, [k]: x })} />`)}
    <//>
  </div>`;
}

const POWERS = [
  ['create_subresellers', 'Create sub-resellers'],
  ['create_packages', 'Create packages'],
  ['set_branding', 'Set branding'],
];

export function PowersTab({ org, reload }) {
  const [granted, setGranted] = useState(new Set(org.powers.granted));
  const flip = (p, on) => {
    const n = new Set(granted);
    if (on) n.add(p);
    else n.delete(p);
    setGranted(n);
  };
  return html`<div>
    <h2>Delegated powers</h2>
    <p class="muted">In force: ${org.powers.effective.join(', ') || 'none'} (a reseller never holds a power its parent lacks).</p>
    <${Form} label="Delegated powers" submit="Save powers" action=${() => put(`/v1/orgs/${org.id}/powers`, { powers: [...granted] })} done=${reload}>
      ${POWERS.map(([p, label]) => html`<${Field} type="checkbox" label=${label} value=${granted.has(p)} onInput=${(on) => flip(p, on)} />`)}
    <//>
  </div>`;
}
