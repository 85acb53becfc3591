// Every page of the console, by address. A new area (alerts, reconciliation, backups, migration)
// is one module in this folder, added here; an org tab (billing) is added to ORG_TABS in orgs.js.
import { AccountPage, PasswordPage } from './account.js';
import { AlertPage, AlertRulesPage, AlertsPage } from './alerts.js';
import { BackupsPage, InspectionPage } from './backups.js';
import { CapacityPage, NodePage, NodesPage } from './cluster.js';
import { OrgPage } from './orgs.js';
import { ReconcilePage, ReconcilePassPage, ReconcileSitePage } from './reconcile.js';
import { SecurityPage } from './security.js';
import { SignInPage } from './sign-in.js';
import { SitePage } from './sites.js';

/** `bare`: drawn without the signed-in shell. */
export const PAGES = [
  { path: '/sign-in', component: SignInPage, bare: true },
  { path: '/account/password', component: PasswordPage },
  { path: '/account', component: AccountPage },
  { path: '/orgs/:id', component: OrgPage },
  { path: '/orgs/:id/:tab', component: OrgPage },
  { path: '/sites/:id', component: SitePage },
  { path: '/sites/:id/:tab', component: SitePage },
  { path: '/cluster', component: NodesPage },
  { path: '/cluster/nodes/:name', component: NodePage },
  { path: '/cluster/capacity', component: CapacityPage },
  { path: '/cluster/alerts', component: AlertsPage },
  { path: '/cluster/alert-rules', component: AlertRulesPage },
  { path: '/alerts/:id', component: AlertPage },
  { path: '/cluster/reconcile', component: ReconcilePage },
  { path: '/cluster/reconcile/sites/:id', component: ReconcileSitePage },
  { path: '/cluster/reconcile/passes/:id', component: ReconcilePassPage },
  { path: '/cluster/backups', component: BackupsPage },
  { path: '/cluster/backups/inspections/:id', component: InspectionPage },
  { path: '/cluster/security', component: SecurityPage },
];

export const NAV = [
  { label: 'Organisations', href: (a) => `/orgs/${a.org_id}`, prefix: () => '/orgs' },
  { label: 'Cluster', href: () => '/cluster', prefix: () => '/cluster', platform: true },
  { label: 'Account', href: () => '/account', prefix: () => '/account' },
];

const compiled = PAGES.map((p) => ({
  page: p,
  names: [...p.path.matchAll(/:(\w+)/g)].map((m) => m[1]),
  re: new RegExp('^' + p.path.replace(/:\w+/g, '([^/]+)') + '/?$'),
}));

export function matchPage(path) {
  for (const c of compiled) {
    const m = c.re.exec(path);
    if (m) return { page: c.page, params: Object.fromEntries(c.names.map((n, i) => [n, decodeURIComponent(m[i + 1])])) };
  }
  return null;
}
