// Websites (spec 2 sections 2.6, 4.2 "Add website", 4.4.1-4.4.2): the account's websites with the
// failed ones first, Add website with the node choice (the panel's hosting node, a listed eligible
// node, or "Chosen by the scheduler"), and a site's page: status, placement reason, its limits and
// which of them its node enforces, PHP tab (operator settings, php.admin; the owner's PHP values),
// Settings and Cron (site-settings.js) and the file manager of the hosting node.
import { useEffect, useState } from 'preact/hooks';
import { api, csrfHeader, del, get, patch, post } from '../lib/api.js';
import { BackupsTab } from './backups.js';
import { LIMIT_LABELS } from '../lib/limits.js';
import { CronTab, PhpValuesForm, phpOptions, SettingsTab } from './site-settings.js';
import { SftpTab } from './site-sftp.js';
import { ActionButton, dash, ErrorBox, Field, Form, html, Link, Loaded, navigate, Notice, Select, Table, useLoad, when } from '../lib/ui.js';

const SCHEDULER = '';
const HOSTING = 'hosting';

export function SitesTab({ org, account }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/sites?limit=500`), [org.id]);
  return html`<div>
    <h2>Websites</h2>
    <${Loaded} state=${list}>${(d) => {
      const failed = d.sites.filter((s) => s.status === 'failed');
      return html`
        ${failed.length ? html`<${Notice} kind="warn">${failed.length} website(s) failed on their node: ${failed.map((s) => s.domain).join(', ')}. A failed site keeps its quota until deleted.<//>` : null}
        <${Table} caption=${`Websites of ${org.name}`} rows=${[...failed, ...d.sites.filter((s) => s.status !== 'failed')]} rowClass=${(s) => s.status} cols=${[
          ['Domain', (s) => html`<${Link} href=${`/sites/${s.id}`}>${s.domain}<//>`],
          ['Status', (s) => html`<span class=${'badge ' + s.status}>${s.status}</span>`],
          ['Node', (s) => s.node],
          ['PHP', (s) => dash(s.php_version)],
          ['Error', (s) => dash(s.error)],
        ]} />`;
    }}<//>
    <h3>Add website</h3>
    <${Loaded} state=${list}>${(d) => html`<${AddWebsite} org=${org} account=${account} scheduled=${d.placement === 'scheduled'} versions=${d.php_versions} />`}<//>
  </div>`;
}

/** Nodes a site may be named on (spec 4.2): alive, not draining, with the web role; only platform logins read the cluster. */
async function eligibleNodes(account) {
  if (account.org_type !== 'platform') return [];
  const c = await api('GET', '/v1/cluster/nodes', undefined, { quiet: true }).catch(() => ({ nodes: [] }));
  return (c.nodes || []).filter((n) => n.name !== HOSTING && n.state === 'alive' && !n.draining && n.roles.includes('web')).map((n) => n.name);
}

/** The node choice: "Chosen by the scheduler" only where the panel runs with -placement scheduled; else new sites go to its hosting node. */
function AddWebsite({ org, account, scheduled, versions }) {
  const canPlace = account.powers.includes('site.place');
  const nodes = useLoad(() => (canPlace ? eligibleNodes(account) : Promise.resolve([])), [canPlace]);
  const [domain, setDomain] = useState('');
  const [aliases, setAliases] = useState('');
  // the newest PHP a new site may get (versions: what the nodes report; none yet: a static site)
  const [php, setPhp] = useState(versions?.length ? versions[versions.length - 1] : '');
  const [node, setNode] = useState(scheduled ? SCHEDULER : HOSTING);
  const action = () =>
    post(`/v1/orgs/${org.id}/sites`, {
      domain: domain.trim(),
      ...(aliases.trim() ? { aliases: aliases.split(',').map((a) => a.trim()).filter(Boolean) } : {}),
      php_version: php || null,
      // the hosting node without -placement scheduled is where the panel places it anyway (no site.place needed)
      ...(node === SCHEDULER || (node === HOSTING && !scheduled) ? {} : { node }),
    });
  const options = [
    ...(scheduled ? [{ value: SCHEDULER, label: 'Chosen by the scheduler' }] : []),
    ...(canPlace || !scheduled ? [{ value: HOSTING, label: "The panel's hosting node" }] : []),
    ...(canPlace ? (nodes.data || []).map((n) => ({ value: n, label: `Node ${n}` })) : []),
  ];
  return html`<${Form} label="Add website" submit="Add website" action=${action} done=${(s) => navigate(`/sites/${s.id}`)}>
    <${Field} label="Domain" value=${domain} onInput=${setDomain} required placeholder="example.com" />
    <${Field} label="Aliases" hint="Comma-separated, optional." value=${aliases} onInput=${setAliases} />
    <${Select} label="PHP version" value=${php} onInput=${setPhp} options=${phpOptions(versions, null)} hint=${versions ? 'The versions the nodes that take new websites offer.' : 'No node has reported its PHP versions yet.'} />
    <${Select} label="Node" value=${node} onInput=${setNode} options=${options}
      hint=${[scheduled ? 'The scheduler picks a node (-placement scheduled).' : "Placement is not scheduled: without a named node, new websites go to the panel's hosting node.", canPlace ? 'Listed: nodes alive, not draining, with the web role.' : 'Without the site.place power the panel places the site.'].join(' ')} />
  <//>`;
}

const SITE_TABS = [
  ['overview', 'Overview'],
  ['settings', 'Settings'],
  ['php', 'PHP'],
  ['cron', 'Cron'],
  ['files', 'Files'],
  ['sftp', 'SFTP'],
  ['backups', 'Backups'],
];

export function SitePage({ params, account }) {
  const site = useLoad(() => get(`/v1/sites/${params.id}`), [params.id]);
  // a site being created or changed settles on its node: look again until it does
  useEffect(() => {
    if (!site.data || site.data.status !== 'pending') return undefined;
    const t = setTimeout(site.reload, 1000);
    return () => clearTimeout(t);
  }, [site.data]);
  const tab = params.tab || 'overview';
  return html`<${Loaded} state=${site}>${(s) => html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol><li><${Link} href=${`/orgs/${s.org_id}/sites`}>Account's websites<//></li><li><span aria-current="page">${s.domain}</span></li></ol></nav>
    <h1>${s.domain} <span class=${'badge ' + s.status} data-testid="site-status">${s.status}</span></h1>
    <nav class="tabs" aria-label="Sections">${SITE_TABS.map(([k, label]) => html`<${Link} href=${`/sites/${s.id}/${k}`} aria-current=${k === tab ? 'page' : undefined}>${label}<//>`)}</nav>
    ${tab === 'settings' ? html`<${SettingsTab} site=${s} reload=${site.reload} />` : tab === 'cron' ? html`<${CronTab} site=${s} reload=${site.reload} />` : tab === 'php' ? html`<${PhpTab} site=${s} account=${account} reload=${site.reload} />` : tab === 'backups' ? html`<${BackupsTab} site=${s} account=${account} />` : tab === 'files' ? html`<${FilesTab} site=${s} />` : tab === 'sftp' ? html`<${SftpTab} site=${s} reload=${site.reload} />` : html`<${Overview} site=${s} reload=${site.reload} />`}
  </section>`}<//>`;
}

function Overview({ site, reload }) {
  const placement = useLoad(() => get(`/v1/sites/${site.id}/placement`), [site.id]);
  return html`<div>
    <dl class="facts">
      <dt>Node</dt><dd>${site.node}</dd>
      <dt>Aliases</dt><dd>${site.aliases.join(', ') || '—'}</dd>
      <dt>PHP</dt><dd>${dash(site.php_version)}</dd>
      <dt>Quota</dt><dd>${site.quota_mb === null ? '—' : `${site.quota_mb} MB`}</dd>
      <dt>Created</dt><dd>${when(site.created_at)}</dd>
      ${site.error ? html`<dt>Error</dt><dd class="error-text">${site.error}</dd>` : null}
    </dl>
    <${SiteLimits} limits=${site.limits} node=${site.node} />
    <${SiteUsage} site=${site} />
    <h2>Placement</h2>
    <${Loaded} state=${placement}>${(p) => html`<div>
      <p data-testid="placement-reason"><strong>${p.node}</strong>: ${p.reason}</p>
      <p class="muted">Decided ${when(p.decided_at)} by ${p.decided_by} (${p.mode}).</p>
      ${p.nodes
        ? html`<${Table} caption="Every node the scheduler weighed" rows=${p.nodes} cols=${[
            ['Node', (n) => n.node],
            ['Qualifies', (n) => (n.qualifies ? 'yes' : 'no')],
            ['Sites', (n) => dash(n.sites)],
            ['CPU', (n) => (n.cpu_percent === null || n.cpu_percent === undefined ? '—' : `${n.cpu_percent.toFixed(1)} %`)],
            ['Reasons', (n) => (n.reasons || []).map((r) => r.message).join('; ') || '—'],
          ]} />`
        : null}
    </div>`}<//>
    <h2>Actions</h2>
    <div class="actions">
      ${site.status === 'active' ? html`<${ActionButton} action=${() => post(`/v1/sites/${site.id}/suspend`)} done=${reload}>Suspend<//>` : null}
      ${site.status === 'suspended' ? html`<${ActionButton} action=${() => post(`/v1/sites/${site.id}/unsuspend`)} done=${reload}>Unsuspend<//>` : null}
      <${ActionButton} danger action=${() => del(`/v1/sites/${site.id}`)} done=${() => navigate(`/orgs/${site.org_id}/sites`)} confirm=${`Delete the website ${site.domain} and its files?`}>Delete website<//>
    </div>
  </div>`;
}

function PhpTab({ site, account, reload }) {
  const [fopen, setFopen] = useState(site.php.allow_url_fopen);
  const [disabled, setDisabled] = useState((site.php.disabled_functions || []).join(', '));
  const operator = account.powers.includes('php.admin');
  return html`<div>
    <h2>PHP</h2>
    <dl class="facts">
      <dt>Version</dt><dd>${dash(site.php_version)}</dd>
      <dt>Workers</dt><dd>${dash(site.php.workers)}</dd>
      <dt>allow_url_fopen</dt><dd>${site.php.allow_url_fopen ? 'on' : 'off'}</dd>
      <dt>Extra disabled functions</dt><dd>${(site.php.disabled_functions || []).join(', ') || 'none'}</dd>
    </dl>
    ${site.php_version ? html`<${PhpValuesForm} site=${site} reload=${reload} />` : html`<p class="muted">A static site runs no PHP.</p>`}
    ${operator
      ? html`<h3>Operator settings</h3>
        <p class="muted">Nothing inside the website can override these.</p>
        <${Form} label="Operator PHP settings" submit="Save PHP settings" action=${() => patch(`/v1/sites/${site.id}/php`, { allow_url_fopen: fopen, disabled_functions: disabled })} done=${reload}>
          <${Field} type="checkbox" label="allow_url_fopen" value=${fopen} onInput=${setFopen} />
          <${Field} label="Extra disabled functions" hint="Comma-separated, at most 64." value=${disabled} onInput=${setDisabled} />
        <//>`
      : html`<p class="muted">Operator PHP settings need the php.admin power.</p>`}
  </div>`;
}

function FilesTab({ site }) {
  const [dir, setDir] = useState('');
  const list = useLoad(() => get(`/v1/sites/${site.id}/files?path=${encodeURIComponent(dir)}`), [site.id, dir]);
  const [error, setError] = useState(null);
  const upload = async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    setError(null);
    const target = (dir ? dir + '/' : '') + file.name;
    const res = await fetch(`/v1/sites/${site.id}/files?path=${encodeURIComponent(target)}`, { method: 'PUT', body: file, headers: csrfHeader() });
    if (!res.ok) setError((await res.json().catch(() => null))?.error || { message: `upload failed (${res.status})` });
    e.target.value = '';
    list.reload();
  };
  const up = dir.includes('/') ? dir.slice(0, dir.lastIndexOf('/')) : '';
  return html`<div>
    <h2>Files <small class="muted">/${dir}</small></h2>
    ${dir ? html`<p><button type="button" class="secondary" onClick=${() => setDir(up)}>Up one folder</button></p>` : null}
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Folder contents" rows=${d.entries} empty="This folder is empty." cols=${[
      ['Name', (f) => (f.type === 'directory' ? html`<button type="button" class="link" onClick=${() => setDir((dir ? dir + '/' : '') + f.name)}>${f.name}/</button>` : f.name)],
      ['Size', (f) => (f.type === 'directory' ? '—' : `${f.size} B`)],
      ['Modified', (f) => when(f.modified)],
      ['', (f) => html`<${ActionButton} danger action=${() => del(`/v1/sites/${site.id}/files?path=${encodeURIComponent((dir ? dir + '/' : '') + f.name)}`)} done=${list.reload} confirm=${`Delete ${f.name}?`}>Delete<//>`],
    ]} />`}<//>
    <div class="field"><label for="upload">Upload a file here</label><input id="upload" type="file" onChange=${upload} /></div>
    <${ErrorBox} error=${error} />
  </div>`;
}

/** What the site's control group used, per hour (issue 34): what metering bills where a rate line prices it. */
function SiteUsage({ site }) {
  const usage = useLoad(() => get(`/v1/sites/${site.id}/usage`), [site.id]);
  return html`<div>
    <h2>Usage</h2>
    <${Loaded} state=${usage}>${(u) =>
      u.group
        ? html`<p class="muted">Now: ${u.group.processes} processes, ${u.group.memory_mb.toFixed(1)} MB of memory (measured ${when(u.measured_at)}).</p>
            <${Table} caption="Usage of this website per hour" rows=${u.hours} cols=${[
              ['Hour', (h) => when(h.hour)],
              ['CPU seconds', (h) => h.cpu_seconds.toFixed(2)],
              ['Memory peak', (h) => `${h.memory_peak_mb} MB`],
              ['Processes (most)', (h) => String(h.processes_max)],
              ['I/O', (h) => `${(h.io_bytes / 1048576).toFixed(1)} MB`],
            ]} />`
        : html`<p class="muted">Its node runs this website in no control group: CPU, memory, processes and I/O are not counted.</p>`}<//>
  </div>`;
}

/** The account's limits as they bind this site: enforced by its node's kernel (its control group), or counted only; an unset limit binds nothing ("—"). */
function SiteLimits({ limits, node }) {
  if (!limits) return null;
  return html`<div>
    <h2>Limits</h2>
    <${Table} caption=${`Limits of this website on node ${node}`} rows=${Object.entries(limits)} cols=${[
      ['Limit', ([k]) => LIMIT_LABELS[k] || k],
      ['Value', ([, l]) => (l.value === null ? 'unlimited' : String(l.value))],
      ['On its node', ([, l]) => html`<span data-testid="limit-on-node">${l.value === null ? '—' : l.on_node === 'enforced' ? 'enforced' : 'bookkeeping only (this node cannot enforce it)'}</span>`],
    ]} />
  </div>`;
}
