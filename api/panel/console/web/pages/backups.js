// Backups (spec 2 sections 2.6, 4.1, 4.2 "Backups at platform level", 4.4.5, 7, 8): a site's Backups
// tab (its restore points: take one now, delete, restore into an account with a confirmation, the
// schedule keeping the newest N; for the platform's logins also Extract for inspection), and the
// platform's backups page under Cluster (deleted-site archives and Restore site id, restore into
// another account, inspections with Remove now and their expiry, cleanup, recovery metrics).
import { useEffect, useState } from 'preact/hooks';
import { api, del, get, post, put } from '../lib/api.js';
import { ClusterNav } from './cluster-nav.js';
import { ago, ActionButton, dash, Field, Form, html, Link, Loaded, navigate, Notice, Select, Table, useLoad, when } from '../lib/ui.js';

const size = (b) => (b === null || b === undefined ? '—' : b < 1e6 ? `${(b / 1e3).toFixed(1)} kB` : `${(b / 1e6).toFixed(1)} MB`);
const platform = (account) => account.org_type === 'platform';

/** Reloads `state` every second while `busy(data)` holds (a node operation settling). */
function useSettle(state, busy) {
  useEffect(() => {
    if (!state.data || !busy(state.data)) return undefined;
    const t = setTimeout(state.reload, 1000);
    return () => clearTimeout(t);
  }, [state.data]);
}

export function BackupsTab({ site, account }) {
  const list = useLoad(() => get(`/v1/sites/${site.id}/restore-points?all=true`), [site.id]);
  useSettle(list, (d) => d.restore_points.some((r) => r.status === 'pending' || r.status === 'deleting'));
  const [restoring, setRestoring] = useState(null);
  return html`<div>
    <h2>Backups</h2>
    <${Loaded} state=${list}>${(d) => html`<div>
      <p class="muted">${d.offsite_copies}</p>
      <${Table} caption=${`Restore points of ${site.domain}`} rows=${d.restore_points} empty="No restore points yet." rowClass=${(r) => r.status} cols=${[
        ['Taken', (r) => when(r.created_at)],
        ['How', (r) => r.trigger],
        ['Status', (r) => html`<span class=${'badge ' + (r.status === 'ready' ? 'ok' : r.status)}>${r.status}</span>`],
        ['Size', (r) => size(r.bytes)],
        ['Databases', (r) => r.databases.join(', ') || '—'],
        ['Error', (r) => dash(r.error)],
        ['', (r) => html`<div class="row-actions">
          ${r.status === 'ready' && platform(account) ? html`<button type="button" class="secondary" aria-expanded=${restoring === r.id} onClick=${() => setRestoring(restoring === r.id ? null : r.id)}>Restore…</button>` : null}
          ${r.status === 'ready' && platform(account) && r.node === 'hosting'
            ? html`<${ActionButton} action=${() => post(`/v1/restore-points/${r.id}/inspection`)} done=${(i) => navigate(`/cluster/backups/inspections/${i.id}`)}>Extract for inspection<//>`
            : null}
          ${r.status === 'ready' || r.status === 'failed' ? html`<${ActionButton} danger action=${() => del(`/v1/restore-points/${r.id}`)} done=${list.reload} confirm=${`Delete the restore point of ${when(r.created_at)}?`}>Delete<//>` : null}
        </div>`],
      ]} />
      ${restoring ? html`<${RestoreInto} key=${restoring} rp=${d.restore_points.find((r) => r.id === restoring)} defaultAccount=${site.org_id} />` : null}
    </div>`}<//>
    <${ActionButton} action=${() => post(`/v1/sites/${site.id}/restore-points`)} done=${list.reload}>Take a restore point now<//>
    ${platform(account) ? null : html`<p class="muted">Restoring a restore point is done at platform level (the platform's logins).</p>`}
    <${Schedule} site=${site} />
  </div>`;
}

/** Restore into an account (platform level): a new site from the restore point, its databases with new passwords shown once. */
function RestoreInto({ rp, defaultAccount }) {
  const [account, setAccount] = useState(defaultAccount);
  const [domain, setDomain] = useState('');
  const [names, setNames] = useState({});
  const [sure, setSure] = useState(false);
  const [done, setDone] = useState(null);
  const action = () => {
    if (!sure) throw new Error('Tick the confirmation first: the restore creates a new website (and databases) in that account.');
    const databases = Object.fromEntries(Object.entries(names).filter(([, n]) => n.trim()));
    return post(`/v1/restore-points/${rp.id}/restore`, { into_account: account.trim(), ...(domain.trim() ? { domain: domain.trim() } : {}), ...(Object.keys(databases).length ? { databases } : {}) });
  };
  if (done) return html`<${Restored} out=${done} />`;
  return html`<${Form} label="Restore into an account" submit="Restore" action=${action} done=${setDone}>
    <p>Restores the restore point of ${when(rp.created_at)} as a new website on node ${rp.node}.</p>
    <${Field} label="Into account (ID)" value=${account} onInput=${setAccount} required autocomplete="off" />
    <${Field} label="Domain of the restored website" hint=${`Empty: ${rp.domain} (only while no website uses it).`} value=${domain} onInput=${setDomain} />
    ${rp.databases.map((db) => html`<${Field} label=${`New name for database ${db}`} hint="Empty: a new name from the old one." value=${names[db] || ''} onInput=${(v) => setNames({ ...names, [db]: v })} />`)}
    <${Field} type="checkbox" label="I confirm: create a website from this restore point" value=${sure} onInput=${setSure} />
  <//>`;
}

function Restored({ out }) {
  return html`<${Notice}>
    Restoring into <${Link} href=${`/sites/${out.site.id}`}>${out.site.domain}<//> (${out.site.status}).
    ${out.databases.length
      ? html`<p>Database passwords, shown once:</p><ul>${out.databases.map((d) => html`<li>${d.name} (from ${d.from}), user <code>${d.user}</code>, password <code data-testid="restored-db-password">${d.password}</code></li>`)}</ul>`
      : null}
  <//>`;
}

function Schedule({ site }) {
  // 404 until a schedule is set: that is "no schedule", not an error to show
  const current = useLoad(() => api('GET', `/v1/sites/${site.id}/backup-schedule`, undefined, { quiet: true }).catch((e) => (e.code === 'not_found' ? null : Promise.reject(e))), [site.id]);
  return html`<h3>Backup schedule</h3>
    <${Loaded} state=${current}>${(s) => html`<${ScheduleForm} key=${s ? `${s.every}-${s.keep}` : 'none'} site=${site} s=${s} reload=${current.reload} />`}<//>`;
}

function ScheduleForm({ site, s, reload }) {
  const [every, setEvery] = useState(s ? s.every : 'daily');
  const [keep, setKeep] = useState(s ? String(s.keep) : '7');
  return html`<div>
    ${s ? html`<p data-testid="backup-schedule">${s.every === 'hourly' ? 'Hourly' : 'Daily'}, keeping the newest ${s.keep}; next run ${when(s.next_runs[0])}.</p>` : html`<p class="muted">No schedule: restore points are taken by hand only.</p>`}
    <${Form} label="Backup schedule" submit="Save schedule" action=${() => put(`/v1/sites/${site.id}/backup-schedule`, { every, keep: Number(keep) })} done=${reload}>
      <${Select} label="Every" value=${every} onInput=${setEvery} options=${[{ value: 'hourly', label: 'hour' }, { value: 'daily', label: 'day' }]} />
      <${Field} label="Keep the newest" type="number" min="1" max="1000" step="1" value=${keep} onInput=${setKeep} required hint="Older scheduled restore points are deleted after each run." />
    <//>
    ${s ? html`<${ActionButton} danger action=${() => del(`/v1/sites/${site.id}/backup-schedule`)} done=${reload} confirm="Stop the backup schedule?">Stop schedule<//>` : null}
  </div>`;
}

// ---- the platform's page ----

export function BackupsPage() {
  return html`<section>
    <h1>Backups</h1>
    <${ClusterNav} current="backups" />
    <${Archives} />
    <h2>Restore into another account</h2>
    <${RestoreById} />
    <h2>Extract for inspection</h2>
    <${Inspections} />
    <${InspectById} />
    <${Cleanup} />
    <${Metrics} />
  </section>`;
}

function Archives() {
  const list = useLoad(() => get('/v1/site-archives'), []);
  const [restored, setRestored] = useState(null);
  return html`<h2>Deleted-site archives</h2>
    ${restored ? html`<${Notice}>Site ${restored.site_id} (${restored.domain}) is restored on node ${restored.node}; it is served again, and the panel holds no record of it.<//>` : null}
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Archives of deleted websites" rows=${d.archives} empty="No archives of deleted websites." cols=${[
      ['Domain', (a) => a.domain],
      ['Site ID', (a) => html`<code>${a.site_id}</code>`],
      ['Deleted', (a) => when(a.time)],
      ['Size', (a) => size(a.bytes)],
      ['', (a) => html`<${ActionButton} action=${() => post(`/v1/sites/${a.site_id}/restore`)} done=${(r) => {
        setRestored(r);
        list.reload();
      }} confirm=${`Restore site ${a.site_id} (${a.domain}) from its archive?`}>Restore site ${a.domain}<//>`],
    ]} />`}<//>`;
}

function RestoreById() {
  const [id, setId] = useState('');
  const rp = useLoad(() => (id.trim().length === 36 ? get(`/v1/restore-points/${id.trim()}`) : Promise.resolve(null)), [id]);
  return html`<div>
    <${Field} label="Restore point ID" value=${id} onInput=${setId} autocomplete="off" hint="From a website's Backups tab." />
    ${rp.data ? html`<${RestoreInto} key=${rp.data.id} rp=${rp.data} defaultAccount="" />` : rp.error ? html`<p class="error-text">${rp.error.message}</p>` : null}
  </div>`;
}

/** The inspection folders that exist now, each with its expiry and Remove now on its own page. */
function Inspections() {
  const list = useLoad(() => get('/v1/inspections'), []);
  return html`<${Loaded} state=${list}>${(d) => html`<${Table} caption="Inspections" rows=${d.inspections} empty="No inspection folders." cols=${[
    ['Website', (i) => (i.site_id ? html`<${Link} href=${`/sites/${i.site_id}/backups`}>${i.domain}<//>` : dash(i.domain))],
    ['Status', (i) => html`<span class=${'badge ' + (i.status === 'ready' ? 'ok' : i.status)}>${i.status}</span>`],
    ['Extracted', (i) => when(i.created_at)],
    ['Removed automatically', (i) => when(i.expires_at)],
    ['', (i) => html`<${Link} href=${`/cluster/backups/inspections/${i.id}`} aria-label=${`Open the inspection of ${i.domain}`}>Open<//>`],
  ]} />`}<//>`;
}

function InspectById() {
  const [id, setId] = useState('');
  return html`<${Form} label="Extract for inspection" submit="Extract for inspection" action=${() => post(`/v1/restore-points/${id.trim()}/inspection`)} done=${(i) => navigate(`/cluster/backups/inspections/${i.id}`)}>
    <p class="muted">Extracts a restore point of a hosting-node website into a root-only folder (TLS private keys left out), removed when its time is up or by Remove now.</p>
    <${Field} label="Restore point ID to inspect" value=${id} onInput=${setId} required autocomplete="off" />
  <//>`;
}

function Cleanup() {
  const [out, setOut] = useState(null);
  return html`<h2>Cleanup</h2>
    <p class="muted">Removes partial archives, orphaned temporary files and expired inspection folders.</p>
    <${ActionButton} action=${() => post('/v1/backups/cleanup')} done=${setOut}>Clean up now<//>
    ${out
      ? html`<${Notice}>${out.removed.length ? `Removed ${out.removed.length} item(s), ${size(out.bytes_freed)} freed.` : 'Nothing to remove.'}
          ${out.removed.length ? html`<ul>${out.removed.map((r) => html`<li>${r.kind}: <code>${r.path}</code> (${r.bytes} B)</li>`)}</ul>` : null}<//>`
      : null}`;
}

function Metrics() {
  const m = useLoad(() => get('/v1/backups/metrics'), []);
  return html`<h2>Recovery metrics <small class="muted">node hosting</small></h2>
    <${Loaded} state=${m}>${(x) => html`<div>
      <dl class="facts">
        ${Object.entries(x.restore_points.by_status).map(([st, v]) => html`<dt>Restore points ${st}</dt><dd>${v.count} (${size(v.bytes)})</dd>`)}
        <dt>Newest restore point</dt><dd>${x.restore_points.newest_age_seconds === null ? 'none' : ago(Date.now() - x.restore_points.newest_age_seconds * 1000)}</dd>
        <dt>Deleted-site archives</dt><dd>${x.site_archives.count} (${size(x.site_archives.bytes)})</dd>
        <dt>Restores</dt><dd>${x.restores.count}, ${x.restores.failed} failed${x.restores.duration_ms ? `; longest ${x.restores.duration_ms.max} ms` : ''}</dd>
      </dl>
      <${Table} caption="Websites with restore points" rows=${x.sites} rowClass=${(s) => (s.last_failure && (!s.last_success || s.last_failure > s.last_success) ? 'failed' : '')} cols=${[
        ['Website', (s) => html`<${Link} href=${`/sites/${s.site_id}/backups`}>${s.domain}<//>`],
        ['Restore points', (s) => s.restore_points],
        ['Size', (s) => size(s.bytes)],
        ['Last success', (s) => when(s.last_success)],
        ['Last failure', (s) => when(s.last_failure)],
        ['Last error', (s) => dash(s.last_error)],
      ]} />
    </div>`}<//>`;
}

export function InspectionPage({ params }) {
  const ins = useLoad(() => get(`/v1/inspections/${params.id}`), [params.id]);
  // after Remove now the folder goes a moment later (its workflow removes it): look again until then
  const [removing, setRemoving] = useState(false);
  useSettle(ins, (i) => i.status === 'extracting' || i.status === 'removing' || (removing && i.status === 'ready'));
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol><li><${Link} href="/cluster/backups">Backups<//></li><li><span aria-current="page">Inspection</span></li></ol></nav>
    <h1>Inspection</h1>
    <${ClusterNav} current="backups" />
    <${Loaded} state=${ins}>${(i) => html`<div>
      <dl class="facts">
        <dt>Status</dt><dd><span class=${'badge ' + (i.status === 'ready' ? 'ok' : i.status)} data-testid="inspection-status">${i.status}</span></dd>
        <dt>Folder</dt><dd><code>${dash(i.path)}</code> (root only)</dd>
        <dt>Restore point</dt><dd><code>${i.restore_point_id}</code></dd>
        <dt>Extracted</dt><dd>${when(i.created_at)}</dd>
        <dt>Removed automatically</dt><dd data-testid="inspection-expiry">${when(i.expires_at)}</dd>
        ${i.removed_at ? html`<dt>Removed</dt><dd>${when(i.removed_at)}</dd>` : null}
        ${i.error ? html`<dt>Error</dt><dd class="error-text">${i.error}</dd>` : null}
      </dl>
      ${i.status === 'ready' || i.status === 'extracting' ? html`<${ActionButton} danger action=${() => del(`/v1/inspections/${i.id}`)} done=${() => {
        setRemoving(true);
        ins.reload();
      }} confirm="Remove the inspection folder now?">Remove now<//>` : null}
    </div>`}<//>
  </section>`;
}
