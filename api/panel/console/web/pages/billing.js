// Billing of an org (spec 2 sections 2.8, 3, 4.1 `/orgs/{id}/billing`, 4.2): the month's statement
// (estimate or closed) with its lines per charge kind and its CSV and JSON exports, the plan billing
// it and, from the level above, its assignment and Close month (offered once the month ended, UTC;
// the final tick is checked by the API); the statements of the orgs it bills and its margin, its
// closed statements of every month; and the plans it owns (rate lines checked by the API, whose
// line-numbered error shows at the field).
import { useState } from 'preact/hooks';
import { api, del, get, patch, post, put } from '../lib/api.js';
import { ActionButton, dash, ErrorBox, Field, Form, html, Link, Loaded, navigate, Notice, Select, Table, useLoad, when } from '../lib/ui.js';

const KINDS = [
  ['base', 'Base'],
  ['accounts', 'Customer accounts'],
  ['websites', 'Websites'],
  ['databases', 'Databases'],
  ['disk', 'Disk (GiB-hours)'],
];

const totals = (t) => Object.entries(t || {}).map(([c, a]) => `${a} ${c}`).join(' + ') || '—';

/** Hands `text` to the browser as a file download. */
function download(name, type, text) {
  const url = window.URL.createObjectURL(new window.Blob([text], { type }));
  const a = Object.assign(document.createElement('a'), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => window.URL.revokeObjectURL(url), 60_000);
}

/** The statement as the API's CSV (Accept: text/csv), saved as a file. */
async function downloadCsv(st) {
  const res = await fetch(`/v1/orgs/${st.org_id}/billing/statement?period=${st.period}`, { headers: { accept: 'text/csv' }, credentials: 'same-origin' });
  if (!res.ok) return api('GET', `/v1/orgs/${st.org_id}/billing/statement?period=${st.period}`); // throws the API's error
  download(`statement-${st.org_id}-${st.period}.csv`, 'text/csv', await res.text());
  return null;
}

export function BillingTab({ org, account }) {
  const period = new URLSearchParams(location.search).get('period') || '';
  const page = useLoad(() => get(`/v1/orgs/${org.id}/billing${period ? `?period=${period}` : ''}`), [org.id, period]);
  const running = useLoad(() => get(`/v1/orgs/${org.id}/billing`).then((p) => p.period), [org.id]);
  const aboveIt = org.id !== account.org_id;
  return html`<div>
    <h2>Billing</h2>
    <${Loaded} state=${running}>${(now) => html`<div class="period"><${Select} label="Month" value=${period || now} onInput=${(p) => navigate(`/orgs/${org.id}/billing?period=${p}`)}
      options=${lastMonths(now, 24).map((p) => ({ value: p, label: p === now ? `${p} (running)` : p }))} /></div>`}<//>
    <${Loaded} state=${page}>${(b) => html`<div>
      <${Notice} kind=${b.metering.on ? 'ok' : 'warn'}>Metering: ${b.metering.message}.<//>
      <${PlanInForce} plan=${b.plan} />
      ${aboveIt ? html`<${AssignPlan} org=${org} plan=${b.plan} done=${page.reload} />` : null}
      <h3>Statement of ${org.name} for ${b.period}</h3>
      ${b.statement ? html`<${Statement} st=${b.statement} />` : html`<p class="muted">Not billed in ${b.period}: no metered hours under a plan.</p>`}
      ${aboveIt && running.data ? html`<${CloseMonth} org=${org} period=${b.period} running=${running.data} st=${b.statement} done=${page.reload} />` : null}
      <${BilledOrgs} b=${b} />
    </div>`}<//>
    <${ClosedStatements} org=${org} />
    ${org.type !== 'customer' ? html`<${Plans} org=${org} />` : null}
  </div>`;
}

/** The running month and the `n - 1` before it, newest first (YYYY-MM). */
function lastMonths(running, n) {
  const [y, m] = running.split('-').map(Number);
  return Array.from({ length: n }, (_, i) => {
    const d = new Date(Date.UTC(y, m - 1 - i, 1));
    return d.toISOString().slice(0, 7);
  });
}

function PlanInForce({ plan }) {
  const name = (p) => (p.plan_id ? p.plan_name : 'Not billed');
  return html`<dl class="facts">
    <dt>Plan now</dt><dd data-testid="plan-now">${plan.current ? `${name(plan.current)} (since ${when(plan.current.effective_from)})` : 'Not billed'}</dd>
    ${plan.next ? html`<dt>Next</dt><dd>${name(plan.next)} from ${when(plan.next.effective_from)}</dd>` : null}
  </dl>`;
}

/** The level above picks one of its plans (a plan bills the orgs directly below its owner) or Not billed. */
function AssignPlan({ org, plan, done }) {
  const plans = useLoad(() => get(`/v1/orgs/${org.parent_id}/billing-plans`), [org.parent_id]);
  const latest = plan.next || plan.current;
  const [choice, setChoice] = useState(latest && latest.plan_id ? latest.plan_id : '');
  return html`<${Loaded} state=${plans}>${(d) => html`<${Form} label="Billing plan" submit="Assign plan" action=${() => put(`/v1/orgs/${org.id}/billing-plan`, { plan_id: choice || null })} done=${done}>
    <${Select} label="Plan billing this organisation" value=${choice} onInput=${setChoice} hint="Takes effect from the next metered hour."
      options=${[{ value: '', label: 'Not billed' }, ...d.plans.map((p) => ({ value: p.id, label: `${p.name} (${p.currency})` }))]} />
  <//>`}<//>`;
}

function Statement({ st }) {
  const [error, setError] = useState(null);
  const csv = () => downloadCsv(st).then(() => setError(null), setError);
  return html`<div>
    <p><span class=${'badge ' + (st.state === 'closed' ? 'ok' : 'pending')} data-testid="statement-state">${st.state}</span>
      ${' '}${st.metered_hours} metered hours${st.closed_at ? `, closed ${when(st.closed_at)}` : ''}; plans: ${st.plans.map((p) => `${p.plan} (${p.hours} h)`).join(', ')}.</p>
    ${KINDS.map(([kind, label]) => {
      const lines = st.lines.filter((l) => l.kind === kind);
      return lines.length
        ? html`<${Table} caption=${label} rows=${lines} cols=${[
            ['Plan', (l) => l.plan],
            ['Detail', (l) => l.detail],
            ['Quantity × hours', (l) => l.quantity_hours],
            ['Monthly price', (l) => `${l.unit_price} ${l.currency}`],
            ['Amount', (l) => `${l.amount} ${l.currency}`],
          ]} />`
        : null;
    })}
    <p><strong>Total: <span data-testid="statement-total">${totals(st.totals)}</span></strong></p>
    <div class="actions">
      <button type="button" class="secondary" onClick=${csv}>Download CSV</button>
      <button type="button" class="secondary" onClick=${() => download(`statement-${st.org_id}-${st.period}.json`, 'application/json', JSON.stringify(st, null, 2))}>Download JSON</button>
    </div>
    <${ErrorBox} error=${error} />
  </div>`;
}

/** Close month, by the level above: offered once the month ended (UTC); the tick is checked by the API. */
function CloseMonth({ org, period, running, st, done }) {
  const [confirm, setConfirm] = useState(false);
  if (st && st.state === 'closed') return null;
  if (period >= running) {
    const [y, m] = period.split('-').map(Number);
    return html`<p class="muted">Close month is offered once ${period} has ended: from ${when(new Date(Date.UTC(y, m, 1)))}.</p>`;
  }
  return html`<${Form} label="Close month" danger submit=${`Close ${period}`} action=${() => post(`/v1/orgs/${org.id}/billing/close`, { period, confirm })} done=${done}>
    <p>Closing writes the statement of ${org.name} for ${period} once; it never changes afterwards.</p>
    <${Field} type="checkbox" label=${`I confirm: close ${period} for good`} value=${confirm} onInput=${setConfirm} />
  <//>`;
}

function BilledOrgs({ b }) {
  if (!b.billed_orgs.length) return null;
  return html`<h3>Organisations it bills</h3>
    <${Table} caption=${`Statements for ${b.period}`} rows=${b.billed_orgs} cols=${[
      ['Organisation', (o) => html`<${Link} href=${`/orgs/${o.org_id}/billing?period=${b.period}`}>${o.org_name}<//>`],
      ['Status', (o) => o.org_status],
      ['Statement', (o) => html`<span class=${'badge ' + (o.state === 'closed' ? 'ok' : 'pending')}>${o.state}</span>`],
      ['Metered hours', (o) => o.metered_hours],
      ['Amount', (o) => totals(o.totals)],
    ]} />
    <dl class="facts" aria-label="Margin">
      <dt>Billed to them</dt><dd>${totals(b.billed_to_customers)}</dd>
      <dt>Billed to it</dt><dd>${totals(b.billed_to_it)}</dd>
      <dt>Margin</dt><dd data-testid="margin">${totals(b.margin)}</dd>
    </dl>`;
}

/** Every closed statement of the org and of the orgs it bills, newest month first; each opens on its org's billing page. */
function ClosedStatements({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/billing/statements`), [org.id]);
  return html`<h3>Closed statements</h3>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Closed statements" rows=${d.statements} empty="No closed statements." cols=${[
      ['Month', (st) => st.period],
      ['Organisation', (st) => (st.org_id === org.id ? `${st.org_name} (billed to it)` : st.org_name)],
      ['Metered hours', (st) => st.metered_hours],
      ['Amount', (st) => totals(st.totals)],
      ['Closed', (st) => when(st.closed_at)],
      ['', (st) => html`<${Link} href=${`/orgs/${st.org_id}/billing?period=${st.period}`} aria-label=${`View the statement of ${st.org_name} for ${st.period}`}>View<//>`],
    ]} />`}<//>`;
}

function Plans({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/billing-plans`), [org.id]);
  const packages = useLoad(() => get(`/v1/orgs/${org.id}/packages`), [org.id]);
  const [editing, setEditing] = useState(null);
  const saved = () => {
    setEditing(null);
    list.reload();
  };
  return html`<div>
    <h3>Plans of ${org.name}</h3>
    <p class="muted">A plan bills the organisations directly below its owner.</p>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Billing plans" rows=${d.plans} empty="No billing plans." cols=${[
      ['Name', (p) => p.name],
      ['Currency', (p) => p.currency],
      ['Base', (p) => p.base_price],
      ['Per account', (p) => p.account_price],
      ['Rate lines', (p) => p.rate_lines.length],
      ['Billing', (p) => `${dash(p.orgs_billed)} org(s)`],
      ['', (p) => html`<div class="row-actions">
        <button type="button" class="secondary" aria-expanded=${editing === p.id} onClick=${() => setEditing(editing === p.id ? null : p.id)}>Edit ${p.name}</button>
        <${ActionButton} danger action=${() => del(`/v1/billing-plans/${p.id}`)} done=${list.reload} confirm=${`Delete the plan ${p.name}?`}>Delete<//>
      </div>`],
    ]} />
    ${editing ? html`<${PlanForm} key=${editing} org=${org} plan=${d.plans.find((p) => p.id === editing)} packages=${packages.data ? packages.data.packages : []} done=${saved} />` : null}`}<//>
    <h3>New plan</h3>
    <${PlanForm} org=${org} packages=${packages.data ? packages.data.packages : []} done=${saved} />
  </div>`;
}

const RATES_HINT = 'One line per selector: "<selector> <per website> <per database> <per GiB of disk>" (monthly prices); selectors node=, cell=, zone=, physical_region=, region= or default; # starts a comment.';

const FIELDS = ['name', 'currency', 'base_price', 'account_price', 'rates'];
/** Whether a refusal naming `field` is shown at a field of the plan form (else above its button). */
const atField = (field) => FIELDS.includes(field) || /^package_prices\./.test(field || '');

/** Create or edit a plan; the API's refusal naming a field shows at that field. */
function PlanForm({ org, plan, packages, done }) {
  const [v, setV] = useState({
    name: plan ? plan.name : '',
    currency: plan ? plan.currency : 'EUR',
    base_price: plan ? plan.base_price : '',
    account_price: plan ? plan.account_price : '',
    rates: plan ? plan.rates : 'default 0 0 0',
    package_prices: plan ? { ...plan.package_prices } : {},
  });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (x) => setV({ ...v, [k]: x });
  const field = error && error.details ? error.details.field : null;
  const label = plan ? `Edit plan ${plan.name}` : 'New plan';
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const prices = Object.fromEntries(Object.entries(v.package_prices).filter(([, p]) => p !== ''));
    const body = { ...v, package_prices: prices };
    try {
      await (plan ? patch(`/v1/billing-plans/${plan.id}`, body) : post(`/v1/orgs/${org.id}/billing-plans`, body));
      setBusy(false);
      done();
    } catch (err) {
      setBusy(false);
      setError(err);
    }
  };
  const at = (name) => (field === name ? error : null);
  return html`<form onSubmit=${submit} aria-label=${label}>
    <div class="grid">
      <${Checked} error=${at('name')} label="Plan name" value=${v.name} onInput=${set('name')} required maxlength="80" />
      <${Checked} error=${at('currency')} label="Currency" hint="ISO 4217, e.g. EUR" value=${v.currency} onInput=${set('currency')} required maxlength="8" />
      <${Checked} error=${at('base_price')} label="Base price per month" inputmode="decimal" value=${v.base_price} onInput=${set('base_price')} required />
      <${Checked} error=${at('account_price')} label="Price per customer account per month" inputmode="decimal" value=${v.account_price} onInput=${set('account_price')} required />
      ${packages.map((p) => html`<${Checked} error=${at(`package_prices.${p.id}`)} label=${`Price per account on package ${p.name}`} inputmode="decimal" placeholder="the account price"
        value=${v.package_prices[p.id] ?? ''} onInput=${(x) => setV({ ...v, package_prices: { ...v.package_prices, [p.id]: x } })} />`)}
    </div>
    <${RatesField} value=${v.rates} onInput=${set('rates')} error=${at('rates')} />
    <${ErrorBox} error=${error && !atField(field) ? error : null} />
    <button type="submit" disabled=${busy} aria-busy=${busy}>${busy ? 'Working…' : plan ? 'Save plan' : 'Create plan'}</button>
  </form>`;
}

/** ids tying a plan field to its error message */
let fieldIds = 0;

/** A labelled field with the API's message about it right below, tied to it (aria-errormessage) and announced. */
function Checked({ error, ...field }) {
  const [id] = useState(() => `plan-error-${++fieldIds}`);
  return html`<div class=${error ? 'invalid' : ''}>
    <${Field} ...${field} aria-invalid=${error ? 'true' : undefined} aria-errormessage=${error ? id : undefined} />
    ${error ? html`<p id=${id} class="field-error" role="alert">${error.message}</p>` : null}
  </div>`;
}

function RatesField({ value, onInput, error }) {
  const [id] = useState(() => `plan-rates-${++fieldIds}`);
  return html`<div class=${'field ' + (error ? 'invalid' : '')}>
    <label for=${id}>Rate lines</label>
    <textarea id=${id} rows="6" value=${value} onInput=${(e) => onInput(e.target.value)} aria-invalid=${error ? 'true' : undefined}
      aria-describedby=${error ? `${id}-error ${id}-hint` : `${id}-hint`}></textarea>
    ${error ? html`<p id=${id + '-error'} class="field-error" role="alert">${error.message}</p>` : null}
    <small id=${id + '-hint'} class="muted">${RATES_HINT}</small>
  </div>`;
}
