// Alerts (spec 2 sections 2.6, 3, 4.2): the platform's alert list with its filters, an alert's
// page (acknowledge / resolve with an optional note, its events, the related alerts and the
// node's metric around it), the alert rules editor, and an org's alerts (soft-quota alerts are
// seen by the account's chain). Without -metrics-interval the API says sampling is off.
import { useState } from 'preact/hooks';
import { get, patch, post } from '../lib/api.js';
import { Chart } from '../lib/chart.js';
import { ago, ActionButton, dash, Field, Form, html, Link, Loaded, Notice, Select, Table, useLoad, when } from '../lib/ui.js';
import { ClusterNav } from './cluster-nav.js';

const STATES = ['unresolved', 'open', 'acknowledged', 'resolved'];
const PAGE = 100;
const any = (label) => ({ value: '', label });
const badge = (v) => html`<span class=${'badge ' + v}>${v}</span>`;

/** The metric each node rule watches, for the chart of its alert. */
const RULE_SERIES = { node_cpu: 'cpu_percent', node_load: 'load1', node_memory: 'memory_used_percent', node_rootfs: 'rootfs_used_percent', node_heartbeat: 'cpu_percent' };

const alertCols = (withNode) => [
  ['Alert', (a) => html`<${Link} href=${`/alerts/${a.id}`}>${a.summary}<//>`],
  ['Severity', (a) => badge(a.severity)],
  ['State', (a) => html`${badge(a.state)}${a.reopened ? html` <small class="muted">re-opened ${a.reopened}×</small>` : null}`],
  ...(withNode ? [['Node', (a) => (a.node ? html`<${Link} href=${`/cluster/nodes/${encodeURIComponent(a.node)}`}>${a.node}<//>` : '—')]] : []),
  ['Rule', (a) => html`<code>${a.rule}</code>`],
  ['Fired', (a) => html`<span title=${when(a.fired_at)}>${ago(a.fired_at)}</span>`],
];

/** Alerts as GET /v1/alerts filters them; `only` keeps those a predicate picks (an org's own); `sayOff`: show the sampling-off notice. */
export function AlertList(props) {
  // other filters start again from the newest
  return html`<${AlertPages} key=${JSON.stringify(props.filter)} ...${props} />`;
}

/** A page of PAGE alerts; `before` is the cursor the API handed out (null: the newest). */
function AlertPages({ filter, caption, withNode = true, only, sayOff = true }) {
  const [before, setBefore] = useState(null);
  const qs = new URLSearchParams(Object.entries({ limit: String(PAGE), ...filter, before }).filter(([, v]) => v));
  const list = useLoad(() => get(`/v1/alerts?${qs}`), [qs.toString()]);
  return html`<${Loaded} state=${list}>${(d) => html`<div>
    ${sayOff && d.metrics_sampling === false ? html`<${Notice} kind="warn">${d.message}<//>` : null}
    <${Table} caption=${caption} rows=${only ? d.alerts.filter(only) : d.alerts} rowClass=${(a) => (a.state === 'resolved' ? '' : a.severity)} empty="No alerts." cols=${alertCols(withNode)} />
    <div class="actions">
      ${before ? html`<button type="button" class="secondary" onClick=${() => setBefore(null)}>Newest alerts</button>` : null}
      ${d.next_before ? html`<button type="button" class="secondary" onClick=${() => setBefore(new Date(d.next_before).toISOString())}>Older alerts</button>` : null}
    </div>
  </div>`}<//>`;
}

export function AlertsPage({ query }) {
  const [state, setState] = useState(query.get('state') || 'unresolved');
  const [severity, setSeverity] = useState('');
  const [node, setNode] = useState(query.get('node') || '');
  return html`<section>
    <h1>Alerts</h1>
    <${ClusterNav} current="alerts" />
    <form class="filters" aria-label="Filter alerts" onSubmit=${(e) => e.preventDefault()}>
      <${Select} label="State" value=${state} onInput=${setState} options=${STATES.map((s) => ({ value: s, label: s }))} />
      <${Select} label="Severity" value=${severity} onInput=${setSeverity} options=${[any('any'), { value: 'warning', label: 'warning' }, { value: 'critical', label: 'critical' }]} />
      <${Field} label="Node" value=${node} onInput=${setNode} placeholder="any node" />
    </form>
    <${AlertList} caption="Alerts, newest first" filter=${{ state, severity, node: node.trim() }} />
  </section>`;
}

/** An org's tab: the alerts of that org (soft quotas of the account, or of the org whose limit is near). */
export function OrgAlertsTab({ org }) {
  const [state, setState] = useState('unresolved');
  return html`<div>
    <h2>Alerts</h2>
    <form class="filters" aria-label="Filter alerts" onSubmit=${(e) => e.preventDefault()}>
      <${Select} label="State" value=${state} onInput=${setState} options=${STATES.map((s) => ({ value: s, label: s }))} />
    </form>
    <${AlertList} caption=${`Alerts of ${org.name}`} filter=${{ state }} withNode=${org.type === 'platform'} only=${(a) => a.org_id === org.id} />
  </div>`;
}

export function AlertPage({ params }) {
  const alert = useLoad(() => get(`/v1/alerts/${params.id}`), [params.id]);
  return html`<${Loaded} state=${alert}>${(a) => html`<${Alert} a=${a} reload=${alert.reload} />`}<//>`;
}

function Alert({ a, reload }) {
  const [note, setNote] = useState('');
  const body = () => (note.trim() ? { note: note.trim() } : {});
  const moved = () => {
    setNote('');
    reload();
  };
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol>
      <li>${a.scope === 'platform' ? html`<${Link} href="/cluster/alerts">Alerts<//>` : html`<${Link} href=${`/orgs/${a.org_id}/alerts`}>Alerts of the account<//>`}</li>
      <li><span aria-current="page">${a.summary}</span></li>
    </ol></nav>
    <h1>${a.summary} ${badge(a.severity)} <span class=${'badge ' + a.state} data-testid="alert-state">${a.state}</span></h1>
    <dl class="facts">
      <dt>Rule</dt><dd><code>${a.rule}</code> (${a.scope === 'platform' ? 'node rule' : 'soft quota'})</dd>
      <dt>Subject</dt><dd>${a.node ? html`node <${Link} href=${`/cluster/nodes/${encodeURIComponent(a.node)}`}>${a.node}<//>` : a.site_id ? html`website <${Link} href=${`/sites/${a.site_id}`}>${a.site_id}<//>` : a.subject}</dd>
      <dt>Value / threshold</dt><dd>${dash(a.value)} / ${dash(a.threshold)}</dd>
      <dt>Opened</dt><dd>${when(a.opened_at)}${a.reopened ? ` (re-opened ${a.reopened}×, last fired ${when(a.fired_at)})` : ''}</dd>
      <dt>Acknowledged</dt><dd>${when(a.acknowledged_at)}</dd>
      <dt>Resolved</dt><dd>${when(a.resolved_at)}</dd>
      <dt>Note</dt><dd data-testid="alert-note">${dash(a.note)}</dd>
    </dl>
    ${a.state === 'resolved'
      ? null
      : html`<div class="card" role="group" aria-label="Acknowledge or resolve">
          <${Field} label="Note (optional)" hint="Kept with the alert and its event." value=${note} onInput=${setNote} maxlength="2000" />
          <div class="actions">
            ${a.state === 'open' ? html`<${ActionButton} action=${() => post(`/v1/alerts/${a.id}/acknowledge`, body())} done=${moved}>Acknowledge<//>` : null}
            <${ActionButton} action=${() => post(`/v1/alerts/${a.id}/resolve`, body())} done=${moved}>Resolve<//>
          </div>
        </div>`}
    ${a.chart ? html`<${AlertChart} a=${a} />` : null}
    <h2>Events</h2>
    <${Table} caption="What happened to this alert" rows=${a.events} cols=${[
      ['When', (e) => when(e.at)],
      ['Event', (e) => e.kind],
      ['By', (e) => dash(e.actor)],
      ['Value', (e) => dash(e.value)],
      ['Note', (e) => dash(e.note)],
    ]} />
    <h2>Related alerts</h2>
    <${Table} caption="Alerts of the same node open at the same time" rows=${a.related} empty="None." cols=${alertCols(false)} />
  </section>`;
}

/** The node's metric the rule watches, from 30 min before the alert to 30 min after (or now). */
function AlertChart({ a }) {
  const chart = useLoad(() => get(a.chart.metrics), [a.chart.metrics]);
  const series = RULE_SERIES[a.rule] || 'cpu_percent';
  return html`<h2>Node ${a.chart.node} around the alert</h2>
    <${Loaded} state=${chart}>${(c) =>
      c.metrics_sampling === false
        ? html`<${Notice} kind="warn">${c.message}<//>`
        : html`<${Chart} points=${c.points} series=${series} from=${a.chart.from} to=${a.chart.to} threshold=${a.rule === 'node_heartbeat' ? null : a.threshold} span=${{ from: a.opened_at, to: a.resolved_at }} />`}<//>`;
}

// ---- rules ----

export function AlertRulesPage({ account }) {
  const rules = useLoad(() => get('/v1/alert-rules'), []);
  const admin = account.login.role === 'platform_admin';
  return html`<section>
    <h1>Alert rules</h1>
    <${ClusterNav} current="rules" />
    <p class="muted">A change applies at the next sample. ${admin ? '' : 'Only a platform_admin changes rules.'}</p>
    <${Loaded} state=${rules}>${(d) => html`<div>
      ${d.metrics_sampling === false ? html`<${Notice} kind="warn">${d.message}<//>` : null}
      ${d.rules.map((r) => html`<${Rule} key=${r.key} r=${r} admin=${admin} reload=${rules.reload} />`)}
    </div>`}<//>
  </section>`;
}

const numberOf = (v) => (v === '' ? undefined : Number(v));
const formOf = (r) => ({ threshold: String(r.threshold), for_seconds: String(r.for_seconds), reopen_seconds: String(r.reopen_seconds), severity: r.severity, enabled: r.enabled });

function Rule({ r, admin, reload }) {
  const [v, setV] = useState(formOf(r));
  const [saved, setSaved] = useState(false);
  const set = (k) => (x) => {
    setSaved(false);
    setV({ ...v, [k]: x });
  };
  const b = r.built_in;
  const save = () => patch(`/v1/alert-rules/${r.key}`, { threshold: numberOf(v.threshold), for_seconds: numberOf(v.for_seconds), reopen_seconds: numberOf(v.reopen_seconds), severity: v.severity, enabled: v.enabled });
  return html`<div class="card" data-rule=${r.key}>
    <h2>${r.condition} <code>${r.key}</code> ${r.changed ? html`<span class="badge warning">changed</span>` : html`<span class="badge">built-in values</span>`} ${r.enabled ? null : html`<span class="badge">disabled</span>`}</h2>
    <p class="muted">${r.scope === 'platform' ? 'Node rule: its alerts belong to the platform.' : "Soft quota: its alerts are seen by the account's chain."} Built in: threshold ${b.threshold}${r.unit ? ' ' + r.unit : ''}, for ${b.for_seconds} s, re-open ${b.reopen_seconds} s, ${b.severity}, ${b.enabled ? 'enabled' : 'disabled'}.</p>
    ${admin
      ? html`<${Form} label=${`Rule ${r.key}`} submit="Save rule" action=${save} done=${() => {
          setSaved(true);
          reload();
        }}>
          <div class="grid">
            <${Field} label=${`Threshold${r.unit ? ` (${r.unit})` : ''}`} type="number" min="0" step="any" value=${v.threshold} onInput=${set('threshold')} required />
            <${Field} label="For (seconds)" hint="The condition holds this long before the alert fires." type="number" min="0" step="1" value=${v.for_seconds} onInput=${set('for_seconds')} required />
            <${Field} label="Re-open window (seconds)" hint="A resolved alert whose condition returns within this re-opens." type="number" min="0" step="1" value=${v.reopen_seconds} onInput=${set('reopen_seconds')} required />
            <${Select} label="Severity" value=${v.severity} onInput=${set('severity')} options=${[{ value: 'warning', label: 'warning' }, { value: 'critical', label: 'critical' }]} />
          </div>
          <${Field} type="checkbox" label="Enabled" value=${v.enabled} onInput=${set('enabled')} />
        <//>
        ${saved ? html`<${Notice}>Rule ${r.key} saved.<//>` : null}
        ${r.changed ? html`<${ActionButton} danger action=${() => post(`/v1/alert-rules/${r.key}/restore`)} done=${(x) => {
          setV(formOf(x));
          setSaved(false);
          reload();
        }} confirm=${`Restore the built-in values of ${r.key}?`}>Restore defaults<//>` : null}`
      : html`<p>Threshold ${r.threshold}${r.unit ? ' ' + r.unit : ''}, for ${r.for_seconds} s, re-open ${r.reopen_seconds} s, ${r.severity}.</p>`}
  </div>`;
}
