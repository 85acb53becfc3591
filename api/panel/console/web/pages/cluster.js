// The cluster pages of the platform's logins (spec 2 sections 2.6, 4.1, 4.2): node list with
// state, draining, heartbeat age, labels and roles; a node's page /cluster/nodes/<name> with its
// latest metrics, charts and open alerts, declared capacity. Without -controller-state the API says node state is unavailable.
import { useState } from 'preact/hooks';
import { del, get, post, put } from '../lib/api.js';
import { ago, ActionButton, dash, Field, Form, html, Link, Loaded, Notice, Select, Table, useLoad, when } from '../lib/ui.js';
import { Chart, SERIES } from '../lib/chart.js';
import { AlertList } from './alerts.js';
import { ClusterNav } from './cluster-nav.js';

const location_ = (l) => [l.logical_region, l.physical_region, l.zone, l.cell].map(dash).join(' / ');

export function NodesPage() {
  const list = useLoad(() => get('/v1/cluster/nodes'), []);
  const [name, setName] = useState('');
  const [added, setAdded] = useState(null);
  return html`<section>
    <h1>Cluster</h1>
    <${ClusterNav} current="nodes" />
    <${Loaded} state=${list}>${(c) =>
      c.state_available === false
        ? html`<${Notice} kind="warn">${c.message}<//>`
        : html`<p class="muted">Controller leader: ${dash(c.controller.leader)} (since ${when(c.controller.leader_since)}). Node state is as of the controller's last write.</p>
          <${Table} caption="Nodes" rows=${c.nodes} rowClass=${(n) => n.state} cols=${[
            ['Name', (n) => html`<${Link} href=${`/cluster/nodes/${encodeURIComponent(n.name)}`}>${n.name}<//>`],
            ['State', (n) => html`<span class=${'badge ' + n.state}>${n.state}</span>`],
            ['Draining', (n) => (n.draining ? 'yes' : 'no')],
            ['Heartbeat', (n) => ago(n.last_heartbeat_at)],
            ['Labels (region / physical / zone / cell)', (n) => location_(n.location)],
            ['Roles', (n) => n.roles.join(', ') || '—'],
          ]} />`}<//>
    <h2>Add a node</h2>
    ${added ? html`<${Notice}>Node <strong>${added.name}</strong> added. ${added.message}: <code>${added.token}</code><//>` : null}
    <${Form} label="Add node" submit="Add node" action=${() => post('/v1/cluster/nodes', { name })} done=${(n) => {
      setAdded(n);
      setName('');
      list.reload();
    }}>
      <${Field} label="Node name" value=${name} onInput=${setName} required />
    <//>
  </section>`;
}

const mb = (x) => (x === null || x === undefined ? '—' : `${Math.round(x)} MB`);

export function NodePage({ params }) {
  const node = useLoad(() => get(`/v1/cluster/nodes/${encodeURIComponent(params.name)}`), [params.name]);
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol><li><${Link} href="/cluster">Cluster<//></li><li><span aria-current="page">${params.name}</span></li></ol></nav>
    <${Loaded} state=${node}>${(c) => (c.state_available === false ? html`<${Notice} kind="warn">${c.message}<//>` : html`<${Node} n=${c.node} />`)}<//>
  </section>`;
}

const uptime = (s) => (s === undefined ? '—' : `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h ${Math.floor((s % 3600) / 60)} min`);
const gb = (bytes) => (bytes === undefined ? '—' : `${(bytes / 1e9).toFixed(2)} GB`);

function Node({ n }) {
  const m = n.metrics;
  return html`<div>
    <h1>${n.name} <span class=${'badge ' + n.state}>${n.state}</span>${n.draining ? html` <span class="badge warning">draining</span>` : null}</h1>
    <dl class="facts">
      <dt>Kind</dt><dd>${n.kind === 'hosting' ? "the panel's own hosting node" : 'node with an agent'}</dd>
      <dt>Last heartbeat</dt><dd>${ago(n.last_heartbeat_at)} (${when(n.last_heartbeat_at)})</dd>
      <dt>Last pull</dt><dd>${ago(n.last_pull_at)}</dd>
      <dt>Agent restarts / reconnects</dt><dd>${n.agent_restarts} / ${n.agent_reconnects}</dd>
      <dt>Location</dt><dd>${location_(n.location)}</dd>
      <dt>Roles</dt><dd>${n.roles.join(', ') || '—'} (${n.roles_source})</dd>
      <dt>Boot ID</dt><dd><code>${dash(n.boot_id)}</code></dd>
      <dt>Controller role</dt><dd>${n.controller_role}</dd>
    </dl>
    <h2>Latest metrics <small class="muted">${when(n.metrics_at)}</small></h2>
    ${m
      ? html`<div class="meters">
          <${Meter} label="CPU" value=${m.cpu_percent} text=${`${Number(m.cpu_percent).toFixed(1)} %`} />
          <${Meter} label="Memory" value=${(100 * (m.memory.total_mb - m.memory.available_mb)) / m.memory.total_mb} text=${`${mb(m.memory.total_mb - m.memory.available_mb)} used of ${mb(m.memory.total_mb)}`} />
          <${Meter} label="Root filesystem" value=${(100 * (m.root_fs.total_mb - m.root_fs.free_mb)) / m.root_fs.total_mb} text=${`${mb(m.root_fs.total_mb - m.root_fs.free_mb)} used of ${mb(m.root_fs.total_mb)}`} />
        </div>
        <dl class="facts">
          <dt>Load (1, 5, 15 min)</dt><dd>${m.load.map((x) => x.toFixed(2)).join(', ')}</dd>
          <dt>Uptime</dt><dd>${uptime(m.uptime_seconds)}</dd>
          <dt>Network since boot</dt><dd>received ${gb(m.network.rx_bytes)}, sent ${gb(m.network.tx_bytes)}</dd>
        </dl>`
      : html`<p class="muted">No metrics reported yet.</p>`}
    <${NodeCharts} name=${n.name} />
    <h2>Open alerts</h2>
    <${AlertList} caption=${`Unresolved alerts of ${n.name}`} filter=${{ state: 'unresolved', node: n.name }} withNode=${false} sayOff=${false} />
    <h2>Facts <small class="muted">${when(n.facts_at)}</small></h2>
    ${n.facts ? html`<pre>${JSON.stringify(n.facts, null, 2)}</pre>` : html`<p class="muted">No facts reported yet.</p>`}
    <${NodeSites} name=${n.name} />
    <${Relocation} name=${n.name} />
    ${n.kind === 'agent' ? html`<${ActionButton} danger action=${() => del(`/v1/cluster/nodes/${encodeURIComponent(n.name)}`)} done=${() => history.back()} confirm=${`Remove the node ${n.name}?`}>Remove node<//>` : null}
  </div>`;
}

const WINDOWS = [
  [1, 'last hour'],
  [6, 'last 6 hours'],
  [24, 'last 24 hours'],
];

/** The node's sampled metrics over the last hours, one chart per series. */
function NodeCharts({ name }) {
  const [hours, setHours] = useState('6');
  const chart = useLoad(() => {
    const to = new Date();
    const from = new Date(to.getTime() - Number(hours) * 3_600_000);
    return get(`/v1/cluster/nodes/${encodeURIComponent(name)}/metrics?from=${from.toISOString()}&to=${to.toISOString()}`);
  }, [name, hours]);
  return html`<h2>Metrics over time</h2>
    <${Loaded} state=${chart}>${(c) =>
      c.metrics_sampling === false
        ? html`<${Notice} kind="warn">${c.message}<//>`
        : html`<div class="filters"><${Select} label="Window" value=${hours} onInput=${setHours} options=${WINDOWS.map(([h, label]) => ({ value: String(h), label }))} /></div>
            <div class="charts">${Object.keys(SERIES).map((k) => html`<${Chart} points=${c.points} series=${k} from=${c.from} to=${c.to} />`)}</div>
            <p class="muted">Averaged per ${c.step} s; samples are kept ${c.retention_days} days (full resolution ${c.full_resolution_days} days, then hourly).</p>`}<//>`;
}

/** The websites on the node: those of the platform's whole tree (a platform login reads them all). */
function NodeSites({ name }) {
  const sites = useLoad(async () => {
    const a = await get('/v1/account');
    const all = await get(`/v1/orgs/${a.org_id}/sites?subtree=true&limit=500`);
    return all.sites.filter((x) => x.node === name);
  }, [name]);
  return html`<h2>Websites</h2>
    <${Loaded} state=${sites}>${(rows) => html`<${Table} caption=${`Websites on ${name}`} rows=${rows} empty="No websites on this node." rowClass=${(x) => x.status} cols=${[
      ['Domain', (x) => html`<${Link} href=${`/sites/${x.id}`}>${x.domain}<//>`],
      ['Status', (x) => html`<span class=${'badge ' + x.status}>${x.status}</span>`],
      ['PHP', (x) => dash(x.php_version)],
      ['Error', (x) => dash(x.error)],
    ]} />`}<//>`;
}

/** Read-only advice of where the node's sites would go (moving sites is planned, not built). */
function Relocation({ name }) {
  const plan = useLoad(() => get(`/v1/cluster/nodes/${encodeURIComponent(name)}/relocation-plan`), [name]);
  return html`<h2>Relocation advice</h2>
    <${Loaded} state=${plan}>${(p) => html`<p class="muted">${p.note}</p>
      ${p.moves.length
        ? html`<${Table} caption="Where each website would go" rows=${p.moves} cols=${[
            ['Website', (m) => html`<${Link} href=${`/sites/${m.site_id}`}>${m.domain}<//>`],
            ['To', (m) => dash(m.to)],
            ['Why', (m) => m.why],
          ]} />`
        : null}`}<//>`;
}

/** A labelled bar (meter role) for a percentage, with the figures in words. */
function Meter({ label, value, text }) {
  const v = value === null || Number.isNaN(value) ? null : Math.max(0, Math.min(100, value));
  return html`<div class="meter">
    <span>${label}</span>
    <div class="bar" role="meter" aria-label=${label} aria-valuemin="0" aria-valuemax="100" aria-valuenow=${v === null ? undefined : Math.round(v)}><div ref=${(el) => el && el.style.setProperty('width', `${v ?? 0}%`)}></div></div>
    <span class="muted">${text}</span>
  </div>`;
}

const RESOURCES = [
  ['cpu_percent', 'CPU (% of one core, summed)'],
  ['memory_mb', 'Memory (MB)'],
  ['disk_mb', 'Disk (MB)'],
];

export function CapacityPage() {
  const cap = useLoad(() => get('/v1/cluster/capacity'), []);
  return html`<section>
    <h1>Declared capacity</h1>
    <${ClusterNav} current="capacity" />
    <${Loaded} state=${cap}>${(c) => html`<${Capacity} c=${c} reload=${cap.reload} />`}<//>
  </section>`;
}

function Capacity({ c, reload }) {
  const [v, setV] = useState(Object.fromEntries([...RESOURCES.map(([k]) => [k, c.resources[k].declared ?? '']), ['overcommit_percent', c.overcommit_percent ?? 100]]));
  const num = (x) => (x === '' || x === null ? null : Number(x));
  return html`<div>
    <p>${c.declared ? `Declared, overcommit ${c.overcommit_percent} % (100 = none).` : 'Nothing declared: the capacity check is off.'}</p>
    <${Table} caption="Capacity" rows=${RESOURCES} cols=${[
      ['Resource', ([, label]) => label],
      ['Declared', ([k]) => dash(c.resources[k].declared)],
      ['Allowed with overcommit', ([k]) => dash(c.resources[k].allowed)],
      ['Committed (customer account caps)', ([k]) => c.resources[k].committed],
      ['Accounts without a cap', ([k]) => c.resources[k].uncapped_accounts],
    ]} />
    <${Form} label="Declare capacity" submit="Declare" action=${() => put('/v1/cluster/capacity', { cpu_percent: num(v.cpu_percent), memory_mb: num(v.memory_mb), disk_mb: num(v.disk_mb), overcommit_percent: Number(v.overcommit_percent) })} done=${reload}>
      ${RESOURCES.map(([k, label]) => html`<${Field} label=${label} type="number" min="1" value=${v[k]} onInput=${(x) => setV({ ...v, [k]: x })} />`)}
      <${Field} label="Overcommit (%)" type="number" min="100" value=${v.overcommit_percent} onInput=${(x) => setV({ ...v, overcommit_percent: x })} />
    <//>
    ${c.declared ? html`<${ActionButton} danger action=${() => del('/v1/cluster/capacity')} done=${reload} confirm="Clear the declaration? The capacity check turns off.">Clear declaration<//>` : null}
  </div>`;
}
