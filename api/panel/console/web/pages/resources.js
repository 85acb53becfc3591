// A customer account's databases (password shown once, at creation or reset) and DNS zones (records edited as lines).
import { useState } from 'preact/hooks';
import { del, get, post, put } from '../lib/api.js';
import { ActionButton, dash, Field, Form, html, Loaded, Notice, Table, useLoad, when } from '../lib/ui.js';

export function DatabasesTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/databases`), [org.id]);
  const [name, setName] = useState('');
  const [created, setCreated] = useState(null);
  return html`<div>
    <h2>Databases</h2>
    ${created ? html`<${Notice}>Database <strong>${created.name}</strong>: user <code>${created.user}</code>, ${created.reset ? 'new password, set on the node in a moment' : 'password'} (shown once) <code data-testid="db-password">${created.password}</code><//>` : null}
    <${Loaded} state=${list}>${(d) => html`<${Table} caption=${`Databases of ${org.name}`} rows=${d.databases} cols=${[
      ['Name', (x) => x.name],
      ['User', (x) => x.user],
      ['Node', (x) => x.node],
      ['Status', (x) => html`<span class=${'badge ' + x.status}>${x.status}</span>`],
      ['Error', (x) => dash(x.error)],
      ['', (x) => html`<${ActionButton} action=${() => post(`/v1/databases/${x.id}/password`, { confirm: x.id })} done=${(r) => {
        setCreated({ ...r, reset: true });
        list.reload();
      }} confirm=${`Give the user ${x.user} of ${x.name} a new password? The current one stops working.`}>Reset password<//>`],
      ['', (x) => html`<${ActionButton} danger action=${() => del(`/v1/databases/${x.id}`)} done=${list.reload} confirm=${`Drop the database ${x.name}?`}>Delete<//>`],
    ]} />`}<//>
    <h3>New database</h3>
    <${Form} label="New database" submit="Create database" action=${() => post(`/v1/orgs/${org.id}/databases`, { name })} done=${(x) => {
      setCreated(x);
      setName('');
      list.reload();
    }}>
      <${Field} label="Database name" value=${name} onInput=${setName} required />
    <//>
  </div>`;
}

/** Records as lines `name type ttl value` (ttl optional), the way zone files read. */
const toLines = (records) => records.map((r) => [r.name, r.type, r.ttl ?? '', r.value].filter((x) => x !== '').join(' ')).join('\n');
function fromLines(text) {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [name, type, ...rest] = l.split(/\s+/);
      const ttl = /^\d+$/.test(rest[0] || '') && rest.length > 1 ? Number(rest.shift()) : undefined;
      return { name, type: (type || '').toUpperCase(), ...(ttl === undefined ? {} : { ttl }), value: rest.join(' ') };
    });
}

export function DnsTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/dns-zones`), [org.id]);
  const [name, setName] = useState('');
  return html`<div>
    <h2>DNS zones</h2>
    <${Loaded} state=${list}>${(d) => (d.zones.length ? d.zones.map((z) => html`<${Zone} zone=${z} reload=${list.reload} />`) : html`<p class="muted">No DNS zones.</p>`)}<//>
    <h3>New zone</h3>
    <${Form} label="New DNS zone" submit="Create zone" action=${() => post(`/v1/orgs/${org.id}/dns-zones`, { name })} done=${() => {
      setName('');
      list.reload();
    }}>
      <${Field} label="Zone name" value=${name} onInput=${setName} required placeholder="example.com" />
    <//>
  </div>`;
}

function Zone({ zone, reload }) {
  const [text, setText] = useState(toLines(zone.records));
  const id = `zone-${zone.id}`;
  return html`<section class="card" aria-labelledby=${id}>
    <h3 id=${id}>${zone.name} <small class="muted">serial ${zone.serial}, changed ${when(zone.updated_at)}</small></h3>
    <${Form} label=${`Records of ${zone.name}`} submit="Save records" action=${() => put(`/v1/dns-zones/${zone.id}/records`, { records: fromLines(text) })} done=${reload}>
      <div class="field"><label for=${id + 'r'}>Records, one a line: name type [ttl] value</label><textarea id=${id + 'r'} rows="6" value=${text} onInput=${(e) => setText(e.target.value)}></textarea></div>
    <//>
    <${ActionButton} danger action=${() => del(`/v1/dns-zones/${zone.id}`)} done=${reload} confirm=${`Delete the zone ${zone.name}?`}>Delete zone<//>
  </section>`;
}
