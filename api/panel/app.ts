import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import Koa from 'koa';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import type { AuthSettings } from '../../services/panel/logins/auth';
import { sitesDeps, type SiteSettings } from '../../services/panel/sites/sites';
import type { DnsSettings } from '../../services/panel/sites/dns';
import { aliveCheck, readyCheck } from '../shared/health';
import { accountRoutes, signInRoutes } from './logins/account-routes';
import { loginRoutes } from './logins/routes';
import { clusterRoutes } from './nodes/cluster-routes';
import { orgRoutes } from './orgs/routes';
import { orgSettingsRoutes, publicBrandingRoutes } from './orgs/settings-routes';
import { packageRoutes } from './orgs/package-routes';
import { siteRoutes } from './sites/routes';
import { certificateRoutes } from './sites/certificate-routes';
import { capacityRoutes } from './nodes/capacity-routes';
import { dnsRoutes } from './sites/dns-routes';
import { databaseRoutes } from './sites/database-routes';
import { quotaRoutes } from './sites/quota-routes';
import { alertRoutes } from './alerts/routes';
import { webhookRoutes, type WebhookRouteOptions } from './alerts/webhook-routes';
import { reconcileRoutes } from './reconcile/routes';
import { RECONCILE_DEFAULTS, type ReconcileSettings } from '../../services/panel/client';
import { backupRoutes } from './sites/backup-routes';
import { backupAdminRoutes } from './sites/backup-admin-routes';
import type { NodeBackups } from '../../hosting-node/site-backups';
import { importRoutes } from './imports/routes';
import type { ImportsDeps } from '../../services/panel/imports/imports';
import { panelAuth } from './shared/auth';
import { billingRoutes } from './billing/routes';
import type { BillingSettings } from '../../services/panel/billing/statements';
import { panelContext, panelInput } from './shared/http';
import { consoleApp } from './console/routes';
import { metricsMiddleware, metricsSettingsFromEnv, registry } from '../shared/metrics';
import { tracingMiddleware } from '../shared/tracing';
import { registerPanelGauges } from '../../services/panel/shared/metrics';
import { openApiRoutes } from '../shared/openapi-routes';
import { panelApi } from './openapi';

export interface PanelDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  auth: AuthSettings;
  /** the issuer authenticator apps show for two-factor entries */
  issuer: string;
  secureCookies: boolean;
  /** sites: the node operations' task queue and agent wait, placement (-placement, -placement-node-facts) */
  sites?: SiteSettings;
  /** where the hosting node's zone files go, and the NS names of every zone */
  dns: DnsSettings;
  /** -controller-state: node records access (the cluster pages) */
  controllerState?: boolean;
  /** the panel's own hosting node once this process runs it (the file manager works on it), else null */
  hostingNode?: () => { root: string } | null;
  /** -metrics-interval: null or absent, sampling and alerts are off */
  metricsIntervalMs?: number | null;
  /** webhooks: sealing key, allowed internal targets, delivery settings; absent: no webhook routes */
  webhooks?: Omit<WebhookRouteOptions, 'db' | 'temporal'>;
  /** reconciliation passes (-reconcile, -reconcile-interval); absent: off */
  reconcile?: ReconcileSettings;
  /** billing: -billing-meter on or off, the clock, the billing worker's task queue */
  billing?: BillingSettings & { taskQueue: string };
  /** backups at platform level: the hosting node's backups once this process runs it, and how long inspection folders stay */
  backups?: { hosting: () => { backups: NodeBackups; inspectSite(siteId: string): Promise<unknown> } | null; inspectionMs?: number };
  /** legacy imports (upload, progress, run); absent: the routes are not served */
  imports?: ImportsDeps;
}

/** The hosting panel's HTTP API (spec 2, PANEL.md): /v1 behind sign-in, and /healthz and /readyz. */
export function createPanelApp(d: PanelDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  registerPanelGauges(registry, d.db);
  app.use(metricsMiddleware('panel', metricsSettingsFromEnv())); // outermost: sees final statuses, needs no sign-in
  const tracing = tracingMiddleware('panel'); // OTEL_EXPORTER_OTLP_ENDPOINT unset: null, nothing added
  if (tracing) app.use(tracing);
  app.use(panelContext(d.logger));
  app.use(panelInput()); // NUL and nesting refused once, before any route
  const open = new Router();
  open.get('/healthz', aliveCheck(d));
  open.get('/readyz', readyCheck(d));
  app.use(open.routes());
  app.use(open.allowedMethods());
  app.use(openApiRoutes([{ path: '/openapi.json', api: panelApi }]).routes()); // before the console, which answers every HTML GET
  app.use(consoleApp());
  const account = { db: d.db, settings: d.auth, issuer: d.issuer, secureCookies: d.secureCookies };
  const signIn = signInRoutes(account);
  const branding = publicBrandingRoutes(d.db);
  app.use(signIn.routes());
  app.use(signIn.allowedMethods());
  app.use(branding.routes());
  app.use(branding.allowedMethods());

  const v1 = new Router();
  v1.use('/v1', panelAuth({ db: d.db, settings: d.auth }));
  for (const r of [accountRoutes(account), orgRoutes(sitesDeps(d, d.sites)), loginRoutes(d.db), orgSettingsRoutes(sitesDeps(d, d.sites)), packageRoutes(sitesDeps(d, d.sites)), capacityRoutes(d.db), dnsRoutes(d.db, d.dns), clusterRoutes({ db: d.db, controllerState: d.controllerState ?? false, sites: sitesDeps(d, d.sites) })]) {
    v1.use(r.routes());
    v1.use(r.allowedMethods());
  }
  const sites = siteRoutes(sitesDeps(d, d.sites));
  v1.use(sites.routes());
  v1.use(sites.allowedMethods());
  const certificates = certificateRoutes({ ...sitesDeps(d, d.sites), sealingKey: d.auth.sealingKey });
  v1.use(certificates.routes());
  v1.use(certificates.allowedMethods());
  const hostingBackups = () => d.backups?.hosting()?.backups ?? null;
  const hostingHasSite = async (id: string) => (await d.backups?.hosting()?.inspectSite(id)) != null;
  for (const r of [backupRoutes(sitesDeps(d, d.sites)), backupAdminRoutes({ ...sitesDeps(d, d.sites), hostingBackups, hostingHasSite, inspectionMs: d.backups?.inspectionMs })]) {
    v1.use(r.routes());
    v1.use(r.allowedMethods());
  }
  for (const r of [databaseRoutes(sitesDeps(d, d.sites)), quotaRoutes({ db: d.db, hostingNode: d.hostingNode ?? (() => null) })]) {
    v1.use(r.routes());
    v1.use(r.allowedMethods());
  }
  for (const r of [alertRoutes({ db: d.db, metricsIntervalMs: d.metricsIntervalMs ?? null }), ...(d.webhooks ? [webhookRoutes({ db: d.db, temporal: d.temporal, ...d.webhooks })] : [])]) {
    v1.use(r.routes());
    v1.use(r.allowedMethods());
  }
  const reconcile = reconcileRoutes({ db: d.db, temporal: d.temporal, settings: d.reconcile ?? { ...RECONCILE_DEFAULTS, mode: null } });
  v1.use(reconcile.routes());
  v1.use(reconcile.allowedMethods());
  const billing = billingRoutes({ db: d.db, temporal: d.temporal, settings: d.billing ?? { metering: false, clock: () => new Date(), taskQueue: 'panel-billing' } });
  v1.use(billing.routes());
  v1.use(billing.allowedMethods());
  if (d.imports) {
    const imports = importRoutes(d.imports);
    v1.use(imports.routes());
    v1.use(imports.allowedMethods());
  }
  app.use(v1.routes());
  app.use(v1.allowedMethods()); // 405 with Allow for a route's other methods (the routers' own run only once a route matched)
  return app;
}
