// The org tree (spec 2 sections 1, 2.2, 4.2): an org's page with breadcrumbs up to the caller's
// root, rename, suspend/reactivate and delete (typed-id confirmation) from the level above, and
// its tabs. ORG_TABS is where an area adds its tab (billing: /orgs/{id}/billing).
import { useState } from 'preact/hooks';
import { del, get, patch, post } from '../lib/api.js';
import { ActionButton, Field, Form, html, Link, Loaded, navigate, Select, Table, useLoad } from '../lib/ui.js';
import { LimitInputs, numbers } from '../lib/limits.js';
import { BrandingTab, LimitsTab, LoginsTab, PackagesTab, PowersTab, UsageTab } from './org-settings.js';
import { DatabasesTab, DnsTab } from './resources.js';
import { SitesTab } from './sites.js';
import { OrgAlertsTab } from './alerts.js';
import { WebhooksTab } from './webhooks.js';
import { BillingTab } from './billing.js';
import { MigrationTab } from './migration.js';
import { SuspensionsTab } from './suspensions.js';

const notCustomer = (org) => org.type !== 'customer';
const customer = (org) => org.type === 'customer';
const below = (org, account) => org.id !== account.org_id;

/** `show(org, account)`: whether the tab applies to that org for that caller. */
export const ORG_TABS = [
  { key: 'below', label: 'Organisations below', show: notCustomer, component: BelowTab },
  { key: 'sites', label: 'Websites', show: customer, component: SitesTab },
  { key: 'databases', label: 'Databases', show: customer, component: DatabasesTab },
  { key: 'dns', label: 'DNS zones', show: customer, component: DnsTab },
  { key: 'migration', label: 'Migration', show: (org, a) => customer(org) && a.powers.includes('migration.run'), component: MigrationTab },
  { key: 'logins', label: 'Logins', show: below, component: LoginsTab },
  { key: 'packages', label: 'Packages', show: notCustomer, component: PackagesTab },
  { key: 'limits', label: 'Limits', show: () => true, component: LimitsTab },
  { key: 'suspensions', label: 'Suspensions', show: () => true, component: SuspensionsTab },
  { key: 'usage', label: 'Usage', show: notCustomer, component: UsageTab },
  { key: 'branding', label: 'Branding', show: notCustomer, component: BrandingTab },
  { key: 'powers', label: 'Delegated powers', show: (org, a) => below(org, a) && org.type === 'reseller', component: PowersTab },
  { key: 'alerts', label: 'Alerts', show: () => true, component: OrgAlertsTab },
  { key: 'webhooks', label: 'Webhooks', show: () => true, component: WebhooksTab },
  { key: 'billing', label: 'Billing', show: () => true, component: BillingTab },
];

/** The orgs from the caller's root down to `id` (each a GET, from the org up its parents). */
async function chainOf(id, rootId) {
  const chain = [];
  for (let cur = id; cur; ) {
    const o = await get(`/v1/orgs/${cur}`);
    chain.unshift(o);
    cur = o.id === rootId ? null : o.parent_id;
  }
  return chain;
}

export function OrgPage({ params, account }) {
  const state = useLoad(() => chainOf(params.id, account.org_id), [params.id]);
  return html`<${Loaded} state=${state}>${(chain) => html`<${Org} chain=${chain} tab=${params.tab} account=${account} reload=${state.reload} />`}<//>`;
}

function Org({ chain, tab, account, reload }) {
  const org = chain[chain.length - 1];
  const tabs = ORG_TABS.filter((t) => t.show(org, account));
  const current = tabs.find((t) => t.key === tab) || tabs[0];
  const Tab = current.component;
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol>
      ${chain.map((o, i) => html`<li>${i === chain.length - 1 ? html`<span aria-current="page">${o.name}</span>` : html`<${Link} href=${`/orgs/${o.id}`}>${o.name}<//>`}</li>`)}
    </ol></nav>
    <h1>${org.name} <span class="badge">${org.type}</span> <span class=${'badge ' + org.status}>${org.status}</span></h1>
    <p class="muted">ID <code>${org.id}</code></p>
    ${org.id !== account.org_id ? html`<${OrgActions} org=${org} reload=${reload} />` : null}
    <nav class="tabs" aria-label="Sections">
      ${tabs.map((t) => html`<${Link} href=${`/orgs/${org.id}/${t.key}`} aria-current=${t === current ? 'page' : undefined}>${t.label}<//>`)}
    </nav>
    <${Tab} org=${org} account=${account} reload=${reload} />
  </section>`;
}

/** What the level above does to an org: rename, suspend or reactivate, delete with its ID typed. */
function OrgActions({ org, reload }) {
  const [name, setName] = useState(org.name);
  const [confirm, setConfirm] = useState('');
  const [open, setOpen] = useState(null);
  const toggle = (which) => setOpen(open === which ? null : which);
  return html`<div class="actions">
    <button type="button" class="secondary" aria-expanded=${open === 'rename'} onClick=${() => toggle('rename')}>Rename</button>
    ${org.status === 'active'
      ? html`<${ActionButton} action=${() => post(`/v1/orgs/${org.id}/suspend`)} done=${reload} confirm=${`Suspend "${org.name}"? Its logins and everything below stop working.`}>Suspend<//>`
      : html`<${ActionButton} action=${() => post(`/v1/orgs/${org.id}/reactivate`)} done=${reload}>Reactivate<//>`}
    <button type="button" class="secondary" aria-expanded=${open === 'delete'} onClick=${() => toggle('delete')}>Delete…</button>
    ${open === 'rename'
      ? html`<${Form} label="Rename" submit="Save name" action=${() => patch(`/v1/orgs/${org.id}`, { name })} done=${reload}>
          <${Field} label="New name" value=${name} onInput=${setName} required maxlength="80" />
        <//>`
      : null}
    ${open === 'delete'
      ? html`<${Form} label="Delete" danger submit="Delete for good" action=${() => del(`/v1/orgs/${org.id}`, { confirm })} done=${() => navigate(`/orgs/${org.parent_id}`)}>
          <p>Only an organisation with nothing below it and no websites or databases can be deleted.</p>
          <${Field} label=${`Type the ID ${org.id} to confirm`} value=${confirm} onInput=${setConfirm} required autocomplete="off" />
        <//>`
      : null}
  </div>`;
}

function BelowTab({ org, account }) {
  const list = useLoad(() => get(`/v1/orgs?root=${org.id}&children=true&limit=500`), [org.id]);
  return html`<div>
    <h2>Organisations below</h2>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption=${`Directly below ${org.name}`} rows=${d.orgs} cols=${[
      ['Name', (o) => html`<${Link} href=${`/orgs/${o.id}`}>${o.name}<//>`],
      ['Type', (o) => o.type],
      ['Status', (o) => html`<span class=${'badge ' + o.status}>${o.status}</span>`],
      ['Below', (o) => o.counts.children],
      ['Logins', (o) => o.counts.logins],
    ]} />`}<//>
    <h2>Create</h2>
    <${CreateOrg} parent=${org} account=${account} done=${(o) => navigate(`/orgs/${o.id}`)} />
  </div>`;
}

/** Create provider (platform), reseller or customer: name, first login, package or custom limits. */
function CreateOrg({ parent, done }) {
  const types = parent.type === 'platform' ? ['provider'] : parent.type === 'customer' ? [] : ['reseller', 'customer'];
  const [type, setType] = useState(types[0]);
  const [name, setName] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [mode, setMode] = useState(type === 'provider' ? 'custom' : 'package');
  const [packageId, setPackageId] = useState('');
  const [limits, setLimits] = useState({});
  const packages = useLoad(() => get(`/v1/orgs/${parent.id}/packages`), [parent.id]);
  if (!types.length) return null;
  const action = () => {
    const body = { parent_id: parent.id, type, name, login: { username, password } };
    if (mode === 'package') {
      if (!packageId) throw new Error('Choose a package, or Custom limits.');
      body.package_id = packageId;
    } else body.limits = numbers(limits);
    return post('/v1/orgs', body);
  };
  return html`<${Form} label="Create organisation" submit=${`Create ${type}`} action=${action} done=${done}>
    ${types.length > 1 ? html`<${Select} label="Type" value=${type} onInput=${setType} options=${types.map((t) => ({ value: t, label: t }))} />` : null}
    <${Field} label="Name" value=${name} onInput=${setName} required maxlength="80" />
    <${Field} label="First login username" hint="Lower-case, 3 to 32 characters." value=${username} onInput=${setUsername} required autocomplete="off" />
    <${Field} label="Initial password" type="password" hint="At least 12 characters; it must be changed at first sign-in." value=${password} onInput=${setPassword} required autocomplete="new-password" />
    <fieldset>
      <legend>Limits</legend>
      <label class="inline"><input type="radio" name="limits-mode" value="package" checked=${mode === 'package'} onChange=${() => setMode('package')} /> Package</label>
      <label class="inline"><input type="radio" name="limits-mode" value="custom" checked=${mode === 'custom'} onChange=${() => setMode('custom')} /> Custom limits</label>
      ${mode === 'package'
        ? html`<${Loaded} state=${packages}>${(d) => html`<${Select} label="Package to assign" value=${packageId} onInput=${setPackageId}
            options=${[{ value: '', label: d.packages.length ? '— choose —' : 'no packages listed' }, ...d.packages.map((p) => ({ value: p.id, label: p.name }))]} />`}<//>`
        : html`<${LimitInputs} limits=${limits} setLimits=${setLimits} />`}
    </fieldset>
  <//>`;
}
