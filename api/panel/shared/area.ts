import type Router from '@koa/router';
import type { Client } from '@temporalio/client';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { OwnNode } from '../../../domain/panel/own-node';
import type { WebhookSettings } from '../../../services/panel/alerts/client';
import type { BillingSettings } from '../../../services/panel/billing/statements';
import type { DnsSettings } from '../../../services/panel/dns/dns';
import type { ImportsDeps } from '../../../services/panel/imports/imports';
import type { AuthSettings } from '../../../services/panel/logins/auth';
import type { ReconcileSettings } from '../../../services/panel/reconcile/client';
import type { SiteSettings } from '../../../services/panel/sites/sites';

// What the panel API's areas are built from, grouped by area, and what an area is: its index.ts
// hands createPanelApp its routers, so adding an area touches its own folders and one list
// (api/panel/app.ts). An area's routers never share a path with another area's.

export interface PanelDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  /** sign-in and sessions (also the /v1 sign-in check), the issuer authenticator apps show for two-factor entries */
  logins: { auth: AuthSettings; issuer: string; secureCookies: boolean };
  /** the node operations' task queue and agent wait, placement (-placement, -placement-node-facts); the panel's own hosting node once this process runs it (the file manager and usage read it), else null */
  sites?: SiteSettings & { hostingNode?: () => OwnNode | null };
  /** -controller-state: node records access (the cluster pages) */
  nodes?: { controllerState?: boolean };
  /** where the hosting node's zone files go, and the NS names of every zone */
  dns: DnsSettings;
  /** -metrics-interval (null or absent: sampling and alerts are off); webhooks: sealing key, allowed internal targets, delivery settings (absent: no webhook routes) */
  alerts?: { metricsIntervalMs?: number | null; webhooks?: { sealingKey: Buffer; allowTargets: string[]; settings: WebhookSettings } };
  /** reconciliation passes (-reconcile, -reconcile-interval); absent: off */
  reconcile?: ReconcileSettings;
  /** -billing-meter on or off, the clock, the billing worker's task queue */
  billing?: BillingSettings & { taskQueue: string };
  /** backups at platform level (on the hosting node, `sites.hostingNode`): how long inspection folders stay */
  backups?: { inspectionMs?: number };
  /** legacy imports (upload, progress, run); absent: the routes are not served */
  imports?: ImportsDeps;
}

/** One area of the panel API: its routers under /v1 (behind sign-in), and any served before sign-in. */
export interface PanelArea {
  /** served without sign-in (sign-in itself, public branding) */
  open?(d: PanelDeps): Router[];
  routes(d: PanelDeps): Router[];
}
