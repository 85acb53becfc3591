// A website's own settings (issue 32: site editing, PHP values, cron): the Settings tab edits
// aliases and the PHP version (only versions its node offers), the PHP values form sets the
// owner's values within the operator's bounds, and the Cron tab edits the lines and shows the
// last runs as the node reported them. Each save is one PATCH /v1/sites/{id}: a node operation.
import { useState } from 'preact/hooks';
import { get, patch } from '../lib/api.js';
import { dash, Field, Form, html, Loaded, Notice, Select, Table, useLoad, when } from '../lib/ui.js';

/** The PHP select: the versions the site's node offers, plus "none"; a current version the node no longer offers stays listed, marked. */
export function phpOptions(offered, current) {
  const versions = offered ?? (current ? [current] : []);
  const all = current && !versions.includes(current) ? [...versions, current] : versions;
  return [...all.map((v) => ({ value: v, label: versions.includes(v) ? `PHP ${v}` : `PHP ${v} (not offered by its node)` })), { value: '', label: 'none (static site)' }];
}

export function SettingsTab({ site, reload }) {
  const [aliases, setAliases] = useState(site.aliases.join(', '));
  const [php, setPhp] = useState(site.php_version ?? '');
  const [saved, setSaved] = useState(false);
  const action = () => {
    const list = aliases.split(',').map((a) => a.trim()).filter(Boolean);
    const body = {
      ...(list.join() !== site.aliases.join() ? { aliases: list } : {}),
      ...((php || null) !== site.php_version ? { php_version: php || null } : {}),
    };
    return patch(`/v1/sites/${site.id}`, body);
  };
  return html`<div>
    <h2>Settings</h2>
    ${saved ? html`<${Notice}>Saved: the node applies the change in a moment.<//>` : null}
    <${Form} label="Website settings" submit="Save settings" action=${action} done=${() => (setSaved(true), reload())}>
      <${Field} label="Aliases" hint="Comma-separated domain names that serve the same website." value=${aliases} onInput=${setAliases} />
      <${Select} label="PHP version" value=${php} onInput=${setPhp} options=${phpOptions(site.node_php_versions, site.php_version)}
        hint=${site.node_php_versions ? `Offered by node ${site.node}.` : `Node ${site.node} has not reported its PHP versions yet.`} />
    <//>
  </div>`;
}

const PHP_VALUES = [
  ['memory_limit', 'Memory limit', 'MB', 16, 1024],
  ['upload_max_filesize', 'Largest upload', 'MB', 1, 1024],
  ['post_max_size', 'Largest form post', 'MB', 1, 1024],
  ['max_execution_time', 'Longest run', 'seconds', 1, 3600],
  ['max_input_time', 'Longest input parsing', 'seconds', 1, 3600],
  ['max_input_vars', 'Most input variables', 'variables', 100, 100000],
];

/** The owner's PHP values: an empty field returns the value to the default. */
export function PhpValuesForm({ site, reload }) {
  const [values, setValues] = useState(Object.fromEntries(PHP_VALUES.map(([k]) => [k, site.php_values?.[k] ?? ''])));
  const action = () => {
    const body = {};
    for (const [k] of PHP_VALUES) {
      const v = String(values[k]).trim();
      const was = site.php_values?.[k];
      if (v === '' && was !== undefined) body[k] = null;
      else if (v !== '' && Number(v) !== was) body[k] = Number(v);
    }
    return patch(`/v1/sites/${site.id}`, { php_values: body });
  };
  return html`<h3>PHP values</h3>
    <p class="muted">Applied as the pool's admin values: the website's code cannot raise them. Empty: PHP's default.</p>
    <${Form} label="PHP values" submit="Save PHP values" action=${action} done=${reload}>
      ${PHP_VALUES.map(([k, label, unit, min, max]) => html`<${Field} type="number" label=${`${label} (${k})`} hint=${`${min} to ${max} ${unit}`} min=${min} max=${max} value=${values[k]} onInput=${(v) => setValues({ ...values, [k]: v })} />`)}
    <//>`;
}

export function CronTab({ site, reload }) {
  const runs = useLoad(() => get(`/v1/sites/${site.id}/cron/runs`), [site.id, site.applied_generation]);
  const [text, setText] = useState(site.cron.join('\n'));
  const action = () => patch(`/v1/sites/${site.id}`, { cron: text.split('\n').map((l) => l.trim()).filter(Boolean) });
  return html`<div>
    <h2>Cron</h2>
    <p class="muted">Lines in crontab(5) form (five fields or @daily …, then the command), run on node ${site.node} as the website's own user, in its limits; a line still running is not started again.</p>
    <${Form} label="Cron lines" submit="Save cron lines" action=${action} done=${reload}>
      <div class="field"><label for="cron-lines">Cron lines, one a line</label><textarea id="cron-lines" rows="5" value=${text} onInput=${(e) => setText(e.target.value)}></textarea></div>
    <//>
    <h3>Last runs</h3>
    <${Loaded} state=${runs}>${(d) => html`<${Table} caption="Last runs, newest first" rows=${d.runs} empty="No run reported yet: lines run on their schedule, and the node reports them at its next heartbeat." rowClass=${(r) => (r.status === 'ok' ? '' : r.status)} cols=${[
      ['Line', (r) => html`<code>${r.line}</code>`],
      ['Started', (r) => when(r.started_at)],
      ['Finished', (r) => when(r.finished_at)],
      ['Status', (r) => html`<span class=${'badge ' + r.status}>${r.status}</span>`],
      ['Exit', (r) => dash(r.exit_code)],
      ['User', (r) => dash(r.user)],
      ['Output', (r) => (r.output ? html`<details><summary>${r.output.length} characters</summary><pre>${r.output}</pre></details>` : '—')],
    ]} />`}<//>
  </div>`;
}
