// The tabs of the platform's cluster area (nodes, capacity, alerts, rules, reconciliation, backups, security):
// one file the cluster, alerts, reconcile and backups pages all import, so none imports another for it.
import { html, Link } from '../lib/ui.js';

export function ClusterNav({ current }) {
  return html`<nav class="tabs" aria-label="Cluster">
    <${Link} href="/cluster" aria-current=${current === 'nodes' ? 'page' : undefined}>Nodes<//>
    <${Link} href="/cluster/capacity" aria-current=${current === 'capacity' ? 'page' : undefined}>Declared capacity<//>
    <${Link} href="/cluster/alerts" aria-current=${current === 'alerts' ? 'page' : undefined}>Alerts<//>
    <${Link} href="/cluster/alert-rules" aria-current=${current === 'rules' ? 'page' : undefined}>Alert rules<//>
    <${Link} href="/cluster/reconcile" aria-current=${current === 'reconcile' ? 'page' : undefined}>Reconciliation<//>
    <${Link} href="/cluster/backups" aria-current=${current === 'backups' ? 'page' : undefined}>Backups<//>
    <${Link} href="/cluster/security" aria-current=${current === 'security' ? 'page' : undefined}>Security<//>
  </nav>`;
}
