// Reconciliation of the hosting node (spec 2 sections 2.6, 3, 4.1; PANEL.md section 4): the
// summary (counts per status, last / running / next pass, Run now), the sites with their verdict,
// and a site's page (status, policy, generations, digests, findings with their diff, recent
// events) with the policy change observe ↔ remediate: the API's review first, then Confirm.
import { useEffect, useRef, useState } from 'preact/hooks';
import { get, post } from '../lib/api.js';
import { ActionButton, dash, ErrorBox, html, Link, Loaded, Notice, Select, Table, useLoad, when } from '../lib/ui.js';
import { ClusterNav } from './cluster-nav.js';

const STATUS_FILTER = ['', 'drift', 'missing', 'unreadable', 'pending', 'in_sync', 'not_checked'];
const badge = (v) => html`<span class=${'badge ' + v}>${v.replace('_', ' ')}</span>`;

/** Loads again every second while `busy(data)` holds (a pass runs). */
function usePoll(state, busy) {
  useEffect(() => {
    if (!state.data || !busy(state.data)) return undefined;
    const t = setTimeout(state.reload, 1000);
    return () => clearTimeout(t);
  }, [state.data]);
}

export function ReconcilePage({ account }) {
  const summary = useLoad(() => get('/v1/reconcile'), []);
  usePoll(summary, (s) => s.running_pass);
  const admin = account.login.role === 'platform_admin';
  return html`<section>
    <h1>Reconciliation</h1>
    <${ClusterNav} current="reconcile" />
    <${Loaded} state=${summary}>${(s) => html`<${Summary} s=${s} admin=${admin} reload=${summary.reload} />`}<//>
    <${ReconcileSites} passId=${summary.data && summary.data.last_pass ? summary.data.last_pass.id : null} />
  </section>`;
}

function passLine(p) {
  const counts = Object.entries(p.counts || {}).filter(([, n]) => n).map(([k, n]) => `${n} ${k.replace('_', ' ')}`).join(', ');
  return `${p.mode} pass (${p.trigger}) started ${when(p.started_at)}${p.finished_at ? `, ${p.status} ${when(p.finished_at)}` : ', running'}: ${p.sites ?? 0} sites${counts ? ` (${counts})` : ''}, ${p.remediated ?? 0} rewritten${p.error ? `; ${p.error}` : ''}`;
}

function Summary({ s, admin, reload }) {
  return html`<div>
    ${s.mode === 'off' ? html`<${Notice} kind="warn">Reconciliation is off (-reconcile off): no passes run.<//>` : null}
    <dl class="facts">
      <dt>Mode</dt><dd data-testid="reconcile-mode">${s.mode}${s.interval_seconds ? `, a pass every ${Math.round(s.interval_seconds / 60)} min` : ''}</dd>
      <dt>Last pass</dt><dd data-testid="last-pass">${s.last_pass ? html`${passLine(s.last_pass)} <${Link} href=${`/cluster/reconcile/passes/${s.last_pass.id}`}>Report<//>` : 'none yet'}</dd>
      <dt>Running now</dt><dd>${s.running_pass ? passLine(s.running_pass) : 'no pass'}</dd>
      <dt>Next scheduled pass</dt><dd>${when(s.next_pass_at)}</dd>
      <dt>Sites remediated automatically</dt><dd>${s.sites_remediating} (policy remediate)</dd>
      <dt>Orphan files (last pass)</dt><dd>${dash(s.orphans)}</dd>
    </dl>
    <${Table} caption="Sites of the hosting node per status" rows=${Object.entries(s.counts)} cols=${[
      ['Status', ([k]) => badge(k)],
      ['Sites', ([k, n]) => html`<span data-status=${k}>${n}</span>`],
      ['Meaning', ([k]) => dash(s.statuses[k] || (k === 'not_checked' ? 'no pass has looked at it yet' : ''))],
    ]} />
    ${admin && s.mode !== 'off' ? html`<${ActionButton} action=${() => post('/v1/reconcile/run')} done=${reload}>Run a pass now<//>` : null}
  </div>`;
}

/** The sites with their verdict; `passId` (the last pass) changing loads them again. */
function ReconcileSites({ passId }) {
  const [f, setF] = useState({ status: '', policy: '', after: '' });
  const qs = new URLSearchParams(Object.entries({ ...f, limit: '200' }).filter(([, v]) => v));
  const list = useLoad(() => get(`/v1/reconcile/sites?${qs}`), [qs.toString(), passId]);
  // a new filter starts at the first page
  const filter = (k) => (v) => setF({ ...f, [k]: v, after: '' });
  return html`<h2>Sites</h2>
    <form class="filters" aria-label="Filter sites" onSubmit=${(e) => e.preventDefault()}>
      <${Select} label="Status" value=${f.status} onInput=${filter('status')} options=${STATUS_FILTER.map((v) => ({ value: v, label: v ? v.replace('_', ' ') : 'any' }))} />
      <${Select} label="Policy" value=${f.policy} onInput=${filter('policy')} options=${[{ value: '', label: 'any' }, { value: 'observe', label: 'observe' }, { value: 'remediate', label: 'remediate' }]} />
    </form>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Sites of the hosting node" rows=${d.sites} empty="No site matches." rowClass=${(x) => (x.status === 'in_sync' ? '' : 'warning')} cols=${[
      ['Domain', (x) => html`<${Link} href=${`/cluster/reconcile/sites/${x.site_id}`}>${x.domain}<//>`],
      ['Status', (x) => badge(x.status)],
      ['Policy', (x) => x.policy],
      ['Checked', (x) => when(x.checked_at)],
    ]} />
    <div class="actions">
      ${f.after ? html`<button type="button" class="secondary" onClick=${() => setF({ ...f, after: '' })}>First page</button>` : null}
      ${d.next ? html`<button type="button" class="secondary" onClick=${() => setF({ ...f, after: d.next })}>Next page</button>` : null}
    </div>`}<//>`;
}

export function ReconcileSitePage({ params, account }) {
  // the panel's reconcile mode too: what a policy really does depends on it
  const site = useLoad(() => Promise.all([get(`/v1/reconcile/sites/${params.id}`), get('/v1/reconcile')]).then(([one, all]) => ({ ...one, mode: all.mode })), [params.id]);
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol><li><${Link} href="/cluster/reconcile">Reconciliation<//></li><li><span aria-current="page">${site.data ? site.data.domain : params.id}</span></li></ol></nav>
    <${Loaded} state=${site}>${(s) => html`<${ReconcileSite} s=${s} admin=${account.login.role === 'platform_admin'} reload=${site.reload} />`}<//>
  </section>`;
}

function ReconcileSite({ s, admin, reload }) {
  return html`<div>
    <h1>${s.domain} <span class=${'badge ' + s.status} data-testid="reconcile-status">${s.status.replace('_', ' ')}</span></h1>
    <p><${Link} href=${`/sites/${s.site_id}`}>The website's own page<//></p>
    <dl class="facts">
      <dt>Policy</dt><dd data-testid="reconcile-policy">${s.policy}</dd>
      <dt>Checked</dt><dd>${when(s.checked_at)}</dd>
      <dt>Generation</dt><dd>panel ${s.generations.panel}, applied ${dash(s.generations.panel_applied)}, on the node ${dash(s.generations.node)}, checked ${dash(s.generations.checked)}</dd>
      <dt>Digest expected</dt><dd><code>${dash(s.digest.expected)}</code></dd>
      <dt>Digest on the node</dt><dd><code>${dash(s.digest.node)}</code></dd>
    </dl>
    <h2>Findings</h2>
    <${Findings} findings=${s.findings} />
    <h2>Policy</h2>
    ${admin ? html`<${PolicyChange} key=${s.policy} s=${s} mode=${s.mode} reload=${reload} />` : html`<p class="muted">Policy <strong>${s.policy}</strong>: ${policyNow(s.policy, s.mode)}. Only a platform_admin changes the policy.</p>`}
    <h2>Recent events</h2>
    <${Table} caption="Latest first" rows=${s.events} empty="No events yet." cols=${[
      ['When', (e) => when(e.at)],
      ['Event', (e) => e.kind],
      ['Pass', (e) => (e.pass_id ? html`<code>${e.pass_id.slice(0, 8)}</code>` : '—')],
      ['Detail', (e) => html`<code>${JSON.stringify(e.detail)}</code>`],
    ]} />
  </div>`;
}

function findingText(f) {
  switch (f.problem) {
    case 'site_missing':
      return f.detail;
    case 'missing':
      return `${f.kind} file missing: ${f.path}`;
    case 'unreadable':
      return `${f.kind} file unreadable (${f.error}): ${f.path}`;
    case 'drift':
      return `${f.kind} file differs from the panel: ${f.path}`;
    case 'generation':
      return `applied generation differs: panel ${f.panel}, node ${f.node}`;
    case 'suspension':
      return `suspension differs: panel ${f.panel ? 'suspended' : 'active'}, node ${f.node ? 'suspended' : 'active'}`;
    default:
      return JSON.stringify(f);
  }
}

/** Findings in words; a drift's diff excerpt (`-` the panel's line, `+` the node's) below it. */
function Findings({ findings, empty = 'Nothing found: the site is as the panel renders it.' }) {
  if (!findings.length) return html`<p class="muted">${empty}</p>`;
  return html`<ul class="findings">
    ${findings.map((f) => html`<li><strong>${f.problem}</strong>: ${findingText(f)}
      ${f.diff ? html`<pre class="diff" aria-label=${`Difference in ${f.path}`}>${f.diff.join('\n')}</pre>` : null}</li>`)}
  </ul>`;
}

/** Review first (the API says what changes and what a remediating pass would overwrite), then Confirm with its token. */
/** What passes really do to the site now: remediation rewrites only when the panel runs -reconcile on. */
function policyNow(policy, mode) {
  if (mode === 'off') return 'no pass runs (the panel runs with -reconcile off)';
  if (policy === 'observe') return 'passes only report this site';
  if (mode === 'dry-run') return 'a remediating pass would rewrite its drifted managed files, but the panel runs -reconcile dry-run: passes only report them, nothing is rewritten';
  return 'passes rewrite its drifted managed files';
}

function PolicyChange({ s, mode, reload }) {
  const to = s.policy === 'observe' ? 'remediate' : 'observe';
  const [review, setReview] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  // the review replaces the button that asked for it: keyboard focus moves to the review
  const region = useRef(null);
  useEffect(() => {
    if (review && region.current) region.current.focus();
  }, [review]);
  const call = async (body, then) => {
    setBusy(true);
    setError(null);
    try {
      then(await post(`/v1/reconcile/sites/${s.site_id}/policy`, body));
    } catch (err) {
      setError(err);
    }
    setBusy(false);
  };
  if (!review)
    return html`<div>
      <p data-testid="policy-now">Policy <strong>${s.policy}</strong>: ${policyNow(s.policy, mode)}.</p>
      <button type="button" disabled=${busy} onClick=${() => call({ policy: to }, setReview)}>Review a change to ${to}</button>
      <${ErrorBox} error=${error} />
    </div>`;
  const r = review.review;
  return html`<div class="card review" role="region" aria-label="Review of the policy change" tabindex="-1" ref=${region}>
    <h3>Change ${r.from} → ${r.to}</h3>
    <p data-testid="policy-effect">${r.effect}.</p>
    <p class="muted">As of the latest check (${when(r.as_of)}), the site's status is ${r.status.replace('_', ' ')}. This review expires ${when(review.expires_at)}.</p>
    ${r.to === 'remediate' ? html`<h4>What the next remediating pass would overwrite</h4><${Findings} findings=${r.overwrites} empty="Nothing: the site's managed files match the panel." />` : null}
    <div class="actions">
      <button type="button" disabled=${busy} onClick=${() => call({ policy: r.to, confirmation_token: review.confirmation_token }, reload)}>Confirm: ${r.to}</button>
      <button type="button" class="secondary" disabled=${busy} onClick=${() => setReview(null)}>Cancel</button>
    </div>
    <${ErrorBox} error=${error} />
  </div>`;
}

/** A pass's report: every site not in sync with its findings, and the orphan files. */
export function ReconcilePassPage({ params }) {
  const pass = useLoad(() => get(`/v1/reconcile/passes/${params.id}`), [params.id]);
  usePoll(pass, (p) => p.status === 'running');
  return html`<section>
    <nav aria-label="Breadcrumbs" class="crumbs"><ol><li><${Link} href="/cluster/reconcile">Reconciliation<//></li><li><span aria-current="page">Pass ${params.id.slice(0, 8)}</span></li></ol></nav>
    <h1>Reconciliation pass</h1>
    <${Loaded} state=${pass}>${(p) => html`<div>
      <p>${passLine(p)}</p>
      <p class="muted">Temporal workflow <code>${p.workflow_id}</code>.</p>
      <h2>Sites not in sync</h2>
      <${Table} caption="Per-site findings of this pass" rows=${p.not_in_sync} empty="Every site checked was in sync." cols=${[
        ['Site', (x) => html`<${Link} href=${`/cluster/reconcile/sites/${x.site_id}`}>${x.domain || x.site_id}<//>`],
        ['Status', (x) => badge(x.status)],
        ['Findings', (x) => html`<${Findings} findings=${x.findings || []} />`],
        ['Rewritten', (x) => (x.remediation ? 'yes' : 'no')],
      ]} />
      <h2>Orphan files</h2>
      <${Table} caption="Managed files of no site the panel knows (reported, never removed)" rows=${(p.orphans && p.orphans.files) || []} empty="None." cols=${[
        ['Path', (f) => html`<code>${f.path}</code>`],
        ['Kind', (f) => f.kind],
        ['Domain', (f) => dash(f.domain)],
      ]} />
    </div>`}<//>
  </section>`;
}
