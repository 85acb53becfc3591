// What is suspended at and below an org (spec 2 section 1.4, issue 32): the org itself, the orgs
// below it, and the websites — each saying whether its own suspension or an org's stops it, since
// reactivating an org restores only what its suspension stopped.
import { get } from '../lib/api.js';
import { html, Link, Loaded, Notice, Table, useLoad, when } from '../lib/ui.js';

export function SuspensionsTab({ org }) {
  const state = useLoad(
    () =>
      Promise.all([
        org.type === 'customer' ? Promise.resolve({ orgs: [] }) : get(`/v1/orgs?root=${org.id}&status=suspended&limit=500`),
        get(`/v1/orgs/${org.id}/sites?subtree=true&suspended=true&limit=500`),
      ]),
    [org.id],
  );
  return html`<div>
    <h2>Suspensions</h2>
    ${org.status === 'suspended' ? html`<${Notice} kind="warn">${org.name} is suspended: its logins, websites and databases and everything below stop until it is reactivated.<//>` : null}
    <${Loaded} state=${state}>${([orgs, sites]) => {
      const below = orgs.orgs.filter((o) => o.id !== org.id);
      return html`
        <h3>Organisations</h3>
        <${Table} caption=${`Suspended organisations below ${org.name}`} rows=${below} empty="No organisation below is suspended." cols=${[
          ['Name', (o) => html`<${Link} href=${`/orgs/${o.id}`}>${o.name}<//>`],
          ['Type', (o) => o.type],
          ['Since', (o) => when(o.suspended_at)],
        ]} />
        <h3>Websites</h3>
        <${Table} caption=${`Suspended websites at and below ${org.name}`} rows=${sites.sites} empty="No website is suspended." cols=${[
          ['Domain', (s) => html`<${Link} href=${`/sites/${s.id}`}>${s.domain}<//>`],
          ['Stopped by', (s) => [s.suspended ? 'its own suspension' : null, s.org_suspended ? "its organisation's suspension" : null].filter(Boolean).join(' and ') || '—'],
          ['Node', (s) => s.node],
        ]} />`;
    }}<//>
  </div>`;
}
