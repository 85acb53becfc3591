// Migration of a customer account (spec 2 sections 4.2 "Legacy import", 4.4.4): upload a cPanel
// archive (with its progress), read the plan, the compatibility report by class and the quota
// check, confirm and run, follow the run live (steps, item states, counts, current item), run
// again after a stop, and note the new database passwords: the API hands them out once.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, csrfHeader, get, post } from '../lib/api.js';
import { ActionButton, dash, ErrorBox, html, Loaded, navigate, Notice, Table, useLoad, when } from '../lib/ui.js';

const POLL_MS = 1000;
/** A run whose progress stands still this long may have lost its worker: "Run again" is offered (it repeats nothing). */
const STALL_MS = 10_000;

const CLASSES = [
  ['migrated', 'Migrated', 'Note'],
  ['migrated_with_changes', 'Migrated with changes', 'Change'],
  ['not_migrated', 'Not migrated', 'Why'],
  ['refused', 'Refused as unsafe', 'Why'],
  ['unknown', 'Unknown', 'Note'],
];
const STEP_LABELS = { dns_zones: 'DNS zones', websites: 'Websites', certificates: 'Certificates', databases: 'Databases and users', site_files: 'Website files', sql_loads: 'SQL loads' };
/** a step the page does not know yet is shown by its API name, never blank */
const stepLabel = (step) => STEP_LABELS[step] ?? step;
const STATUS_LABELS = { ready: 'not run yet', running: 'running', stopped: 'stopped', done: 'done', refused: 'refused' };
const BADGE = { ready: 'pending', running: 'pending', stopped: 'failed', done: 'active', refused: 'failed', pending: '', pre_existing: '', failed: 'failed' };

/** The API's refusal of the last upload (unsafe, over a limit), shown above the import it recorded. */
let refusal = null;

/** A size as people write it: 20 GB, 3.5 MB, 812 bytes (one decimal only where it says something). */
function mb(bytes) {
  const [n, unit] = bytes >= 1024 ** 3 ? [bytes / 1024 ** 3, 'GB'] : bytes >= 1024 ** 2 ? [bytes / 1024 ** 2, 'MB'] : bytes >= 1024 ? [bytes / 1024, 'KB'] : [bytes, 'bytes'];
  return `${Number.isInteger(n) ? n : n.toFixed(1)} ${unit}`;
}

/** How far an import's items got: a refused import ran nothing; items the account held already are not "imported". */
function itemsSummary(i) {
  if (i.status === 'refused') return 'none: the import was refused';
  const held = i.counts.pre_existing ? `, ${i.counts.pre_existing} already in the account` : '';
  const own = i.counts.total - i.counts.pre_existing;
  return i.runs === 0 ? `${own} to import${held}` : `${i.counts.done} of ${own} imported${held}`;
}
const selectedImport = () => new URLSearchParams(location.search).get('import');

export function MigrationTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/imports`), [org.id]);
  const open = (id) => navigate(`/orgs/${org.id}/migration${id ? `?import=${id}` : ''}`);
  const id = selectedImport();
  return html`<div>
    <h2>Migration</h2>
    <p class="muted">Move a cPanel account backup (<code>${'cpmove-<user>.tar.gz'}</code>) into ${org.name}: nothing changes until you confirm the report.</p>
    ${id
      ? html`<p><button type="button" class="link" onClick=${() => open(null)}>All imports of this account</button></p>
          <${ImportView} key=${id} id=${id} done=${list.reload} />`
      : html`<${Loaded} state=${list}>${(d) => html`<div>
          <${Upload} org=${org} maxBytes=${d.max_upload_bytes} opened=${(imp) => { list.reload(); open(imp); }} />
          <h3>Previous imports</h3>
          <${Table} caption=${`Imports into ${org.name}, newest first`} rows=${d.imports} empty="No imports yet." cols=${[
            ['Archive', (i) => html`<button type="button" class="link" onClick=${() => open(i.id)}>${i.archive}</button>`],
            ['Status', (i) => html`<span class=${'badge ' + BADGE[i.status]}>${STATUS_LABELS[i.status]}</span>`],
            ['Items', itemsSummary],
            ['Runs', (i) => i.runs],
            ['Uploaded', (i) => when(i.created_at)],
            ['Error', (i) => dash(i.error)],
          ]} />
        </div>`}<//>`}
  </div>`;
}

/** Sends the archive as the raw body with XMLHttpRequest, whose upload events give the progress. */
function sendArchive(orgId, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new window.XMLHttpRequest();
    xhr.open('POST', `/v1/orgs/${orgId}/imports?name=${encodeURIComponent(file.name)}`);
    xhr.setRequestHeader('content-type', 'application/gzip');
    xhr.setRequestHeader('accept', 'application/json');
    for (const [k, v] of Object.entries(csrfHeader())) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded, e.total);
    xhr.onerror = () => reject(new ApiError(0, { error: { code: 'upload_failed', message: 'The upload was cut off before the panel answered (is the archive larger than the panel accepts?).', details: {} } }));
    xhr.onload = () => {
      let json;
      try {
        json = JSON.parse(xhr.responseText);
      } catch {
        json = null; // not JSON (a proxy's error page): the status speaks
      }
      if (xhr.status === 201) resolve(json);
      else reject(new ApiError(xhr.status, json));
    };
    xhr.send(file);
  });
}

function Upload({ org, maxBytes, opened }) {
  const [file, setFile] = useState(null);
  const [sent, setSent] = useState(null); // { loaded, total } while uploading
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    if (!file) return;
    // the API's own limit and message, before a byte is sent
    if (file.size > maxBytes) {
      setError(new ApiError(400, { error: { code: 'validation_failed', message: `The request is not valid: archive: larger than ${maxBytes} bytes`, details: {} } }));
      return;
    }
    setSent({ loaded: 0, total: file.size });
    try {
      const imp = await sendArchive(org.id, file, (loaded, total) => setSent({ loaded, total }));
      opened(imp.id);
    } catch (err) {
      setSent(null);
      // refused as unsafe or over a limit: the import is recorded with its report and quota check
      if (err.details && err.details.import_id) {
        refusal = { id: err.details.import_id, error: err };
        opened(err.details.import_id);
      } else setError(err);
    }
  };
  const pct = sent && sent.total ? Math.floor((sent.loaded / sent.total) * 100) : 0;
  return html`<form onSubmit=${submit} aria-label="Upload an account archive">
    <div class="field">
      <label for="archive">Account archive</label>
      <input id="archive" type="file" accept=".tar.gz,.tgz,application/gzip" required aria-describedby="archive-h" onChange=${(e) => setFile(e.target.files[0] || null)} />
      <small id="archive-h" class="muted">At most ${mb(maxBytes)}. The panel reads it, checks it and answers with the plan; nothing runs yet.</small>
    </div>
    ${sent
      ? html`<div class="field"><label for="upload-progress">Uploading ${file.name}: ${pct} % (${mb(sent.loaded)} of ${mb(sent.total)})${pct === 100 ? ', the panel is reading it…' : ''}</label>
          <progress id="upload-progress" max=${sent.total} value=${sent.loaded}></progress></div>`
      : null}
    <${ErrorBox} error=${error} />
    <button type="submit" disabled=${!!sent} aria-busy=${!!sent}>${sent ? 'Uploading…' : 'Upload and check'}</button>
  </form>`;
}

/** One import: loads it, and follows it every second while it runs; keeps the passwords of the first read that carries them. */
function ImportView({ id, done }) {
  const [imp, setImp] = useState(null);
  const [error, setError] = useState(null);
  const [passwords, setPasswords] = useState(null);
  const [stalled, setStalled] = useState(false);
  const last = useRef({ sig: '', at: Date.now(), status: null });
  const load = async () => {
    try {
      const x = await get(`/v1/imports/${id}`);
      if (x.passwords) setPasswords(x.passwords);
      const sig = JSON.stringify([x.status, x.progress.counts, x.progress.current]);
      if (sig !== last.current.sig) last.current = { ...last.current, sig, at: Date.now() };
      setStalled(x.status === 'running' && Date.now() - last.current.at > STALL_MS);
      if (last.current.status === 'running' && x.status !== 'running') done();
      last.current.status = x.status;
      setImp(x);
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => void load(), [id]);
  useEffect(() => {
    if (!imp || imp.status !== 'running') return undefined;
    const t = setTimeout(load, POLL_MS);
    return () => clearTimeout(t);
  }, [imp, error]); // a failed read (the panel restarting) is tried again
  if (!imp) return error ? html`<${ErrorBox} error=${error} />` : html`<p class="muted" aria-busy="true">Loading…</p>`;
  const started = (x) => {
    last.current = { sig: '', at: Date.now(), status: x.status };
    setImp(x);
  };
  return html`<section aria-labelledby="import-title">
    <h3 id="import-title">${imp.archive} <span class=${'badge ' + BADGE[imp.status]} data-testid="import-status">${STATUS_LABELS[imp.status]}</span></h3>
    <p class="muted">Import <code>${imp.id}</code>, uploaded ${when(imp.created_at)}; ${imp.report.read.entries} archive entries, ${mb(imp.report.read.expanded_bytes)} expanded; run ${imp.runs} time(s).</p>
    <${ErrorBox} error=${error || (refusal && refusal.id === id ? refusal.error : null)} />
    ${passwords
      ? html`<${Passwords} list=${passwords} />`
      : imp.status === 'done' && imp.items.some((i) => i.step === 'databases' && i.state === 'done')
        ? html`<p class="muted">The new database passwords were shown once, at the first look after the run, and are not shown again (a password made by a worker that was stopped is known to no one).</p>`
        : null}
    ${imp.status === 'refused' ? html`<${Notice} kind="warn">${imp.report.status === 'refused' ? 'This archive holds entries refused as unsafe' : 'This import would exceed a limit of the account'}: nothing can run, and the uploaded copy is deleted. Upload the archive again once it is fixed${imp.quota.fits ? '' : ' or the limits are raised'}.<//>` : null}
    ${imp.status === 'running' || imp.status === 'stopped' || imp.status === 'done' ? html`<${Progress} imp=${imp} />` : null}
    <${Actions} imp=${imp} stalled=${stalled} started=${started} />
    ${imp.status === 'ready' || imp.status === 'refused'
      ? html`<${Quota} quota=${imp.quota} /><${Report} imp=${imp} />`
      : html`<details><summary>Quota check and compatibility report</summary><${Quota} quota=${imp.quota} /><${Report} imp=${imp} /></details>`}
  </section>`;
}

function Passwords({ list }) {
  if (!list.length) return null;
  return html`<div class="notice warn" role="region" aria-label="New database passwords">
    <strong>New database passwords: note them now, they will not be shown again.</strong>
    <${Table} caption="Each imported database's user got a new random password" rows=${list} cols=${[
      ['Database', (p) => p.database],
      ['User', (p) => html`<code>${p.user}</code>`],
      ['Password', (p) => html`<code data-testid="import-password">${p.password}</code>`],
    ]} />
  </div>`;
}

function Actions({ imp, stalled, started }) {
  const [confirmed, setConfirmed] = useState(false);
  const run = () => post(`/v1/imports/${imp.id}/run`);
  if (imp.status === 'ready') {
    return html`<div class="card">
      <div class="field check"><label for="confirm-run">I have read the report and the quota check: import into this account</label><input id="confirm-run" type="checkbox" checked=${confirmed} onChange=${(e) => setConfirmed(e.target.checked)} /></div>
      ${confirmed ? html`<${ActionButton} action=${run} done=${started}>Confirm and run<//>` : html`<button type="button" disabled>Confirm and run</button>`}
    </div>`;
  }
  if (imp.status === 'refused' && imp.report.status !== 'refused') return html`<p><button type="button" disabled aria-describedby="over-quota">Confirm and run</button> <small id="over-quota" class="muted">over a limit of the account: see the quota check</small></p>`;
  if (imp.status === 'stopped' || (imp.status === 'running' && stalled)) {
    return html`<div class="card">
      <p>${imp.status === 'stopped' ? `The run stopped${imp.error ? `: ${imp.error}` : '.'}` : 'No progress for a while: if the worker or the panel was restarted, run again.'} What was done is not repeated.</p>
      <${ActionButton} action=${run} done=${started}>Run again<//>
    </div>`;
  }
  return null;
}

function Progress({ imp }) {
  const p = imp.progress;
  return html`<div>
    <h4>Progress</h4>
    <p data-testid="import-counts">${p.counts.done} done, ${p.counts.pre_existing} already in the account, ${p.counts.running} running, ${p.counts.pending} pending, ${p.counts.failed} failed, of ${p.counts.total} items.</p>
    ${p.current ? html`<p data-testid="import-current">Now: ${stepLabel(p.current.step)}: <strong>${p.current.name}</strong></p>` : null}
    <div class="meters">${p.steps.map((s) => html`<div class="meter">
      <span>${stepLabel(s.step)}</span>
      <div class="bar" role="progressbar" aria-label=${stepLabel(s.step)} aria-valuemin="0" aria-valuemax=${s.total} aria-valuenow=${s.finished}><div style=${`width:${s.total ? (100 * s.finished) / s.total : 100}%`}></div></div>
      <span>${s.finished} of ${s.total}</span>
    </div>`)}</div>
    <${Table} caption="Items, in the order they run" rows=${imp.items} rowClass=${(i) => i.state} cols=${[
      ['#', (i) => i.seq + 1],
      ['Step', (i) => stepLabel(i.step)],
      ['Item', (i) => i.name],
      ['State', (i) => html`<span class=${'badge ' + (BADGE[i.state] ?? i.state)}>${i.state.replace('_', ' ')}</span>`],
      ['Attempts', (i) => i.attempts],
      ['Error', (i) => dash(i.error)],
    ]} />
  </div>`;
}

function Quota({ quota }) {
  return html`<div>
    <h4>Quota check: ${quota.fits ? 'fits' : 'over a limit'}</h4>
    <${Table} caption="Each limit the import touches, at the account and every level above" rows=${quota.lines} rowClass=${(l) => (l.fits ? '' : 'at_limit')} empty="No limit applies to what this archive adds." cols=${[
      ['Limit', (l) => l.limit],
      ['At', (l) => l.level],
      ['Used', (l) => l.used],
      ['Imported', (l) => l.adding],
      ['Limit value', (l) => l.value],
      ['Fits', (l) => (l.fits ? 'yes' : html`<strong class="error-text">no: ${l.used} + ${l.adding} > ${l.value}</strong>`)],
    ]} />
  </div>`;
}

function Report({ imp }) {
  const t = imp.plan.totals;
  return html`<div>
    <h4>Plan</h4>
    <p>${t.websites} website(s), ${t.domains} domain(s), ${t.dns_zones} DNS zone(s), ${t.databases} database(s), ${t.disk_mb} MB and ${t.inodes} file(s) of site files${imp.plan.main_domain ? html`; main domain <strong>${imp.plan.main_domain}</strong>` : null}.</p>
    <h4>Compatibility report</h4>
    ${(imp.report.counts.refused ? [...CLASSES.filter(([k]) => k === 'refused'), ...CLASSES.filter(([k]) => k !== 'refused')] : CLASSES).filter(([k]) => imp.report.counts[k]).map(([k, label, noteLabel]) => html`<section class="card" aria-label=${label} data-class=${k}>
      <h5>${label} (${imp.report.counts[k]})</h5>
      <${Table} rows=${imp.report.items.filter((i) => i.class === k)} cols=${[
        ['Kind', (i) => i.kind],
        ['Item', (i) => i.name],
        [noteLabel, (i) => dash(i.note)],
      ]} />
    </section>`)}
  </div>`;
}
