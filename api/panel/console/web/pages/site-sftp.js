// A website's SFTP tab (issue 34 §2): where to connect (host, port, user as the site's node reports
// them) and the keys that may log in: add one with a label (an OpenSSH public key line), see each
// key's type, bits and SHA-256 fingerprint, remove one (its open sessions end at once); a site over
// its quota is shown read-only with the reason.
import { useState } from 'preact/hooks';
import { del, get, post } from '../lib/api.js';
import { ActionButton, Field, Form, html, Loaded, Notice, Table, useLoad, when } from '../lib/ui.js';

export function SftpTab({ site, reload }) {
  const sftp = useLoad(() => get(`/v1/sites/${site.id}/sftp`), [site.id, site.generation]);
  const [label, setLabel] = useState('');
  const [key, setKey] = useState('');
  const done = () => (setLabel(''), setKey(''), reload());
  return html`<div>
    <h2>SFTP</h2>
    <${Loaded} state=${sftp}>${(d) => html`
      ${d.endpoint
        ? html`<dl class="facts" data-testid="sftp-endpoint">
            <dt>Host</dt><dd><code>${d.endpoint.host ?? `the address of node ${site.node}`}</code></dd>
            <dt>Port</dt><dd><code>${d.endpoint.port}</code></dd>
            <dt>User</dt><dd><code>${d.endpoint.user ?? 'reported by the node in a moment'}</code></dd>
          </dl>
          <p class="muted">Keys only (no passwords). You land in the website's folder; its files are in <code>public_html</code>.</p>
          ${site.suspended || site.org_suspended ? html`<${Notice} kind="error">This website is suspended: SFTP logins are refused until it is reactivated.<//>` : null}
          ${d.read_only ? html`<div data-testid="sftp-read-only"><${Notice} kind="warn">Read-only: ${d.read_only_reason}.<//></div>` : null}`
        : html`<${Notice} kind="error">Node ${site.node} offers no SFTP (no sshd, or it cannot confine sites there).<//>`}
      <h3>Keys</h3>
      <${Table} caption=${`SFTP keys of ${site.domain} (${d.keys.length} of ${d.max_keys})`} rows=${d.keys} empty="No key yet: add one to log in." cols=${[
        ['Label', (k) => k.label],
        ['Type', (k) => `${k.type} (${k.bits} bits)`],
        ['Fingerprint', (k) => html`<code>${k.fingerprint}</code>`],
        ['Added', (k) => when(k.added_at)],
        ['', (k) => html`<${ActionButton} danger confirm=${`Remove the key "${k.label}"? Its open sessions end.`} action=${() => del(`/v1/sites/${site.id}/sftp/keys/${k.id}`)} done=${reload}>Remove ${k.label}<//>`],
      ]} />
      ${d.keys.length < d.max_keys
        ? html`<${Form} label="Add an SFTP key" submit="Add key" action=${() => post(`/v1/sites/${site.id}/sftp/keys`, { label, public_key: key })} done=${done}>
            <${Field} label="Label" hint="Whose key, e.g. laptop." value=${label} onInput=${setLabel} required />
            <div class="field"><label for="sftp-key">Public key</label><textarea id="sftp-key" rows="3" aria-describedby="sftp-key-h" value=${key} onInput=${(e) => setKey(e.target.value)} placeholder="ssh-ed25519 AAAA… you@laptop"></textarea>
              <small id="sftp-key-h" class="muted">One line from your .pub file. ed25519, ECDSA or RSA of 2048 bits or more; DSA is refused.</small></div>
          <//>`
        : null}`}<//>
  </div>`;
}
