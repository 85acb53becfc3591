// Webhooks of an org (spec 2 section 6): its endpoints (events of the org and everything below),
// add one (the signing secret is shown once), enable / disable, delete, and each endpoint's
// deliveries with their attempts and Redeliver.
import { useState } from 'preact/hooks';
import { del, get, patch, post } from '../lib/api.js';
import { ActionButton, dash, Field, Form, html, Loaded, Notice, Table, useLoad, when } from '../lib/ui.js';

const EVENTS = ['alert.fired', 'alert.resolved'];

export function WebhooksTab({ org }) {
  const list = useLoad(() => get(`/v1/orgs/${org.id}/webhooks`), [org.id]);
  const [created, setCreated] = useState(null);
  const [open, setOpen] = useState(null);
  return html`<div>
    <h2>Webhooks</h2>
    <p class="muted">Each endpoint receives the events of ${org.name} and everything below it, signed with its secret (header <code>Panel-Signature</code>).</p>
    ${created
      ? html`<${Notice}>Endpoint added. Signing secret, shown once: <code data-testid="webhook-secret">${created.secret}</code> (${created.message}).<//>`
      : null}
    <${Loaded} state=${list}>${(d) => html`<${Table} caption=${`Webhook endpoints of ${org.name}`} rows=${d.endpoints} empty="No endpoints." cols=${[
      ['URL', (e) => html`<code>${e.url}</code>${e.description ? html`<br /><small class="muted">${e.description}</small>` : null}`],
      ['Events', (e) => e.events.join(', ')],
      ['Enabled', (e) => (e.enabled ? 'yes' : 'no')],
      ['Added', (e) => when(e.created_at)],
      ['', (e) => html`<div class="row-actions">
        <button type="button" class="secondary" aria-expanded=${open === e.id} onClick=${() => setOpen(open === e.id ? null : e.id)}>Deliveries</button>
        <details><summary>Edit</summary>
          <${EndpointForm} label=${`Edit endpoint ${e.url}`} submit="Save endpoint" initial=${e} send=${(b) => patch(`/v1/webhooks/${e.id}`, { ...b, description: b.description || null })} done=${list.reload} />
        </details>
        <${ActionButton} action=${() => patch(`/v1/webhooks/${e.id}`, { enabled: !e.enabled })} done=${list.reload}>${e.enabled ? 'Disable' : 'Enable'}<//>
        <${ActionButton} danger action=${() => del(`/v1/webhooks/${e.id}`)} done=${() => {
          setCreated(null);
          list.reload();
        }} confirm=${`Delete the endpoint ${e.url}? Its deliveries go with it.`}>Delete<//>
      </div>`],
    ]} />
    ${open && d.endpoints.some((e) => e.id === open) ? html`<${Deliveries} endpoint=${d.endpoints.find((e) => e.id === open)} />` : null}`}<//>
    <h3>Add an endpoint</h3>
    <${AddEndpoint} org=${org} done=${(e) => {
      setCreated(e);
      list.reload();
    }} />
  </div>`;
}

/** The endpoint's URL, description and events; `send(body)` creates or changes it. */
function EndpointForm({ label, submit, initial, send, done }) {
  const [url, setUrl] = useState(initial.url);
  const [description, setDescription] = useState(initial.description || '');
  const [events, setEvents] = useState(new Set(initial.events));
  const flip = (t, on) => {
    const n = new Set(events);
    if (on) n.add(t);
    else n.delete(t);
    setEvents(n);
  };
  return html`<${Form} label=${label} submit=${submit} action=${() => send({ url: url.trim(), events: [...events], description: description.trim() })} done=${done}>
    <${Field} label="Endpoint URL" type="url" hint="http:// or https://; private addresses only where the operator allows them." value=${url} onInput=${setUrl} required placeholder="https://example.com/hooks/panel" />
    <${Field} label="Description" value=${description} onInput=${setDescription} maxlength="200" />
    <fieldset>
      <legend>Events</legend>
      ${EVENTS.map((t) => html`<${Field} type="checkbox" label=${t} value=${events.has(t)} onInput=${(on) => flip(t, on)} />`)}
    </fieldset>
  <//>`;
}

function AddEndpoint({ org, done }) {
  // a new form (empty fields) after each endpoint added
  const [round, setRound] = useState(0);
  const send = (b) => post(`/v1/orgs/${org.id}/webhooks`, { url: b.url, events: b.events, ...(b.description ? { description: b.description } : {}) });
  return html`<${EndpointForm} key=${round} label="Add webhook endpoint" submit="Add endpoint" initial=${{ url: '', events: EVENTS }} send=${send} done=${(e) => {
    setRound(round + 1);
    done(e);
  }} />`;
}

function Deliveries({ endpoint }) {
  const list = useLoad(() => get(`/v1/webhooks/${endpoint.id}/deliveries?limit=50`), [endpoint.id]);
  const [shown, setShown] = useState(null);
  return html`<div class="card" role="region" aria-label=${`Deliveries to ${endpoint.url}`}>
    <h3>Deliveries to <code>${endpoint.url}</code></h3>
    <p><button type="button" class="secondary" onClick=${list.reload}>Refresh</button></p>
    <${Loaded} state=${list}>${(d) => html`<${Table} caption="Newest first" rows=${d.deliveries} empty="Nothing delivered yet." rowClass=${(x) => (x.status === 'failed' ? 'failed' : '')} cols=${[
      ['Event', (x) => x.event_type],
      ['Status', (x) => html`<span class=${'badge ' + x.status}>${x.status}</span>${x.redelivery_of ? html` <small class="muted">redelivery</small>` : null}`],
      ['Attempts', (x) => x.attempts],
      ['Created', (x) => when(x.created_at)],
      ['Finished', (x) => when(x.finished_at)],
      ['', (x) => html`<div class="row-actions">
        <button type="button" class="secondary" aria-expanded=${shown === x.id} onClick=${() => setShown(shown === x.id ? null : x.id)}>Attempts</button>
        <${ActionButton} action=${() => post(`/v1/webhook-deliveries/${x.id}/redeliver`)} done=${list.reload}>Redeliver<//>
      </div>`],
    ]} />`}<//>
    ${shown ? html`<${Attempts} key=${shown} id=${shown} />` : null}
  </div>`;
}

function Attempts({ id }) {
  const d = useLoad(() => get(`/v1/webhook-deliveries/${id}`), [id]);
  return html`<${Loaded} state=${d}>${(x) => html`<${Table} caption=${`Attempts of delivery ${id.slice(0, 8)}`} rows=${x.attempts} empty="No attempt yet." cols=${[
    ['#', (a) => a.attempt],
    ['When', (a) => when(a.at)],
    ['Answer', (a) => dash(a.status_code)],
    ['Latency', (a) => (a.latency_ms === null ? '—' : `${a.latency_ms} ms`)],
    ['Error', (a) => dash(a.error)],
  ]} />`}<//>`;
}
