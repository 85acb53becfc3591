import { Client, Connection } from '@temporalio/client';
import type { ClientConfig } from 'pg';
import { NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
import { createPanelApp } from '../api/panel/app';
import { panelClientError } from '../api/panel/shared/http';
import { createNodeApp } from '../api/panel/nodes/node-app';
import { connectionSettings, type Db } from '../platform/db';
import { DEFAULT_NAMESERVERS } from '../platform/config';
import { listen, type Listening } from '../platform/http-server';
import { startHostingNode, type HostingNode } from '../hosting-node';
import type { Logger } from '../platform/logger';
import type { PanelFlags } from '../platform/panel-flags';
import { startController, type ControllerBounds, type NodeController } from '../services/panel/nodes/controller';
import type { DnsSettings } from '../services/panel/dns/dns';
import { NODE_OP_DEFAULTS, type NodeOpSettings } from '../services/panel/sites/client';
import { ensureReconcileSchedule, RECONCILE_DEFAULTS, type ReconcileSettings } from '../services/panel/reconcile/client';
import { ensureAlertEvalSchedule, removeAlertEvalSchedule, type WebhookSettings } from '../services/panel/alerts/client';
import { WEBHOOK_RETRY_DEFAULTS, type WebhookDeliveryRetry } from '../domain/shared/webhooks';
import { ALERT_EVAL_SCHEDULE_ID, PANEL_TASK_QUEUE, RECONCILE_SCHEDULE_ID } from '../domain/panel/workflows';
import { resumePendingDatabaseOps } from '../services/panel/databases/databases';
import { resumePendingOps } from '../services/panel/sites/sites';
import { startPendingDeliveries } from '../services/panel/alerts/webhooks';
import { resumePendingBackupOps } from '../services/panel/backups/backups';
import { ensureHostingNode, recordHeartbeat } from '../services/panel/nodes/nodes';
import { OperationWakeups } from '../services/panel/nodes/queue';
import { recordCronRuns } from '../services/panel/sites/cron-runs';
import { pruneAttempts, THROTTLE_DEFAULTS, type ThrottleSettings } from '../services/panel/logins/throttle';
import { seedTwoFactorRoles } from '../services/panel/logins/two-factor-policy';
import { HOSTING_NODE } from '../domain/panel/node-ops';
import { runWorker } from '../workers/base';
import { createPanelWorker } from '../workers/panel';
import { keepSchedules } from '../workers/schedules';
import { billingSettings, startBilling, type PanelBillingOptions } from './panel-billing';
import { importSettings, type ImportOptions } from './panel-imports';
import { observedClientOptions } from '../platform/temporal-client';
import { temporalConnectOptions, type TemporalSecurity } from '../platform/temporal-connection';

export interface PanelRuntimeOptions {
  db: Db;
  temporalAddress: string;
  /** TLS and API key of the Temporal connections (platform/temporal-connection); absent: plain gRPC */
  temporalSecurity?: TemporalSecurity;
  namespace: string;
  logger: Logger;
  port: number;
  host?: string;
  flags: PanelFlags;
  sealingKey: Buffer;
  sessionIdleMs: number;
  sessionMaxMs: number;
  throttle?: Partial<ThrottleSettings>;
  /** DNS zones: the hosting node's zone directory (null: panel records only) and the NS names */
  dns?: DnsSettings;
  /** for the LISTEN and controller lock connections; default: the connection `db` was made with */
  databaseUrl?: string | ClientConfig;
  /** -controller-state: tick and heartbeat-age bounds (tests shorten them) */
  controller?: Partial<ControllerBounds>;
  /** -node-api-listen: heartbeat interval told to agents, fallback poll of waiting long polls, hand-out lease */
  nodeApi?: { heartbeatSeconds?: number; pollFallbackMs?: number; operationLeaseMs?: number };
  /** node operations: the panel task queue and how long an agent has to report (tests shorten it) */
  nodeOps?: Partial<NodeOpSettings>;
  /**
   * The panel's own hosting node and the panel worker that applies node operations (to that node
   * directly, to the others through their agents). Absent: this process runs neither (another does).
   */
  hosting?: PanelHostingOptions;
  /** webhooks: internal addresses allowed as targets (PANEL_WEBHOOK_ALLOW_TARGETS), retries (tests shorten them) */
  /** reconciliation passes: interval (else -reconcile-interval, else 15 min), batch size, heartbeat timeout (tests shorten them) */
  reconcile?: Partial<Omit<ReconcileSettings, 'mode' | 'taskQueue'>>;
  /** billing (-billing-meter): clock, task queue, schedule id, workflow bundle (tests set them) */
  billing?: PanelBillingOptions;
  /** how long a restore point extracted for inspection stays (default 24 h; tests shorten it) */
  backupInspectionMs?: number;
  /** webhooks: internal addresses allowed as targets (PANEL_WEBHOOK_ALLOW_TARGETS), retries and how often new deliveries are started (tests shorten them) */
  webhooks?: { allowTargets?: string[]; retry?: Partial<WebhookDeliveryRetry>; dispatchEveryMs?: number };
  /** legacy imports: where uploads are kept, the reading limits, the PHP versions offered */
  imports?: ImportOptions;
}

/** The reconciliation settings of this process: -reconcile, -reconcile-interval, and the panel task queue. */
export const reconcileSettings = (o: Pick<PanelRuntimeOptions, 'flags' | 'reconcile' | 'nodeOps'>): ReconcileSettings => ({
  ...RECONCILE_DEFAULTS,
  ...(o.flags.reconcileIntervalMs ? { intervalMs: o.flags.reconcileIntervalMs } : {}),
  ...o.reconcile,
  mode: o.flags.reconcile,
  taskQueue: o.nodeOps?.taskQueue ?? RECONCILE_DEFAULTS.taskQueue,
});

export interface PanelHostingOptions {
  /** the node's directory tree (PANEL.md section 2) */
  root: string;
  /** where the node's web server listens */
  webPort: number;
  /** where nginx serves attached certificates (HTTPS by SNI); absent: no TLS */
  webTlsPort?: number | null;
  webHost?: string;
  backupDir?: string | null;
  builtinWebServer?: boolean;
  /** run MariaDB on this port of 127.0.0.1 (the node's `db` role: customer databases); null or absent: none */
  mariadbPort?: number | null;
  /** how long MariaDB may take to come up before the node runs without it (default 30 s) */
  mariadbTimeoutMs?: number;
  /** SFTP for the sites on this port (the node's own sshd); null or absent: none */
  sftpPort?: number | null;
  /** how often the hosting node's facts, metrics and site usage are recorded (default 30 s) */
  reportEveryMs?: number;
  /** how often lost starts of node operations are looked for (default 60 s) */
  resumeEveryMs?: number;
  /** pre-built panel workflow bundle (tests build it once); otherwise bundled from workflows/panel */
  workflowBundle?: WorkflowBundleOption;
}

export interface PanelRuntime {
  url: string;
  /** the node API's URL with -node-api-listen, else null */
  nodeApiUrl: string | null;
  /** the controller with -controller-state, else null */
  controller: NodeController | null;
  /** the panel's own hosting node when this process runs it, else null */
  hostingNode: HostingNode | null;
  close(): Promise<void>;
}

/** Wires one panel API process (`panel-api serve`): Temporal client, Koa app, HTTP server. */
export async function startPanelApi(o: PanelRuntimeOptions): Promise<PanelRuntime> {
  const connection = await Connection.connect(temporalConnectOptions(o.temporalAddress, o.temporalSecurity));
  const temporal = new Client({ connection, namespace: o.namespace, ...observedClientOptions() });
  const throttle = { ...THROTTLE_DEFAULTS, ...o.throttle };
  // Sign-in counts of every address that ever signed in would pile up: prune the stale ones hourly.
  const prune = setInterval(() => pruneAttempts(o.db, throttle).catch((err) => o.logger.warn({ err }, 'pruning sign-in counts failed')), 3_600_000);
  prune.unref();
  // -require-2fa-roles only seeds the platform-wide policy: a stored value wins (PANEL.md section 2)
  if (o.flags.requireTwoFactorRoles.length) await seedTwoFactorRoles(o.db, o.flags.requireTwoFactorRoles);
  // the hosting node starts after the app is built: the file manager reads it when a request comes
  let hostingNode: HostingNode | null = null;
  const app = createPanelApp({
    db: o.db,
    temporal,
    logger: o.logger,
    logins: { auth: { sealingKey: o.sealingKey, sessionIdleMs: o.sessionIdleMs, sessionMaxMs: o.sessionMaxMs, throttle }, issuer: 'Hosting panel', secureCookies: false },
    sites: { nodeOps: o.nodeOps, placement: { mode: o.flags.placement, factsFile: o.flags.placementNodeFacts, nodeApiEnabled: o.flags.nodeApiListen !== null }, hostingNode: () => hostingNode },
    nodes: { controllerState: o.flags.controllerState },
    dns: o.dns ?? { zonesDir: null, nameservers: DEFAULT_NAMESERVERS },
    alerts: { metricsIntervalMs: o.flags.metricsIntervalMs, webhooks: { sealingKey: o.sealingKey, allowTargets: o.webhooks?.allowTargets ?? [], settings: webhookSettings(o) } },
    reconcile: reconcileSettings(o),
    billing: billingSettings(o.flags.billingMeter, o.billing),
    backups: { inspectionMs: o.backupInspectionMs },
    imports: importSettings(o, temporal).uploads,
  });
  // What has been started, stopped newest first on close (or when a later start fails).
  const stops: Array<() => Promise<unknown>> = [async () => clearInterval(prune), () => connection.close()];
  const stopAll = async () => {
    for (let stop = stops.pop(); stop; stop = stops.pop()) await stop().catch((err) => o.logger.error({ err }, 'panel: error while stopping'));
  };
  try {
    // The panel's own hosting node has a record from the start (sites and operations refer to it).
    await ensureHostingNode(o.db);
    let controller: NodeController | null = null;
    if (o.flags.controllerState) {
      const c = await startController({ databaseUrl: o.databaseUrl ?? connectionSettings(o.db), logger: o.logger, ...o.controller });
      stops.push(() => c.stop());
      controller = c;
    }
    let nodeApi: Listening | null = null;
    if (o.flags.nodeApiListen) {
      const wakeups = new OperationWakeups(o.databaseUrl ?? connectionSettings(o.db), o.logger);
      await wakeups.start();
      stops.push(() => wakeups.stop());
      const nodeApp = createNodeApp({ db: o.db, temporal, logger: o.logger, wakeups, ...o.nodeApi });
      const n = await listen(nodeApp.callback(), o.flags.nodeApiListen.port, o.flags.nodeApiListen.host);
      stops.push(() => n.close());
      nodeApi = n;
    }
    hostingNode = o.hosting ? await startHosting(o, o.hosting, stops, temporal) : null;
    if (o.flags.billingMeter) await startBilling({ ...o, databaseUrl: o.databaseUrl ?? connectionSettings(o.db) }, temporal, stops);
    const http = await listen(app.callback(), o.port, o.host, panelClientError);
    stops.push(() => http.close());
    return { url: http.url, nodeApiUrl: nodeApi?.url ?? null, controller, hostingNode, close: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * Starts the panel's own hosting node, records what it reports (facts, metrics, site usage) on its
 * node record now and every reportEveryMs, and runs the panel worker that applies node operations;
 * every minute it starts the workflow of any site or database operation whose start was lost
 * (resumePendingOps, resumePendingDatabaseOps).
 */
async function startHosting(o: PanelRuntimeOptions, h: PanelHostingOptions, stops: Array<() => Promise<unknown>>, temporal: Client): Promise<HostingNode> {
  const node = await startHostingNode({
    root: h.root,
    webPort: h.webPort,
    webTlsPort: h.webTlsPort,
    webHost: h.webHost,
    backupDir: h.backupDir,
    builtinWebServer: h.builtinWebServer,
    mariadbPort: h.mariadbPort,
    mariadbTimeoutMs: h.mariadbTimeoutMs,
    sftpPort: h.sftpPort,
    logger: o.logger,
  });
  stops.push(() => node.stop());
  const startedAt = new Date().toISOString();
  let cronSeq = 0;
  const report = async () => {
    const since = Date.now();
    const [metrics, usage] = await Promise.all([node.metrics(), node.usage()]);
    const cron = node.cronRunsSince(cronSeq);
    await recordHeartbeat(o.db, HOSTING_NODE, { facts: node.facts(), metrics, usage, agentStartedAt: startedAt, reconnects: 0 }, since);
    await recordCronRuns(o.db, HOSTING_NODE, cron.runs);
    cronSeq = cron.seq;
  };
  await report();
  const timer = setInterval(() => report().catch((err) => o.logger.warn({ err }, 'recording the hosting node report failed')), h.reportEveryMs ?? 30_000);
  timer.unref();
  stops.push(async () => clearInterval(timer));
  const connection = await NativeConnection.connect(temporalConnectOptions(o.temporalAddress, o.temporalSecurity));
  stops.push(() => connection.close());
  const imports = importSettings(o, temporal).run(() => node);
  const worker = await createPanelWorker({ connection, namespace: o.namespace, taskQueue: o.nodeOps?.taskQueue, db: o.db, hostingNode: node, workflowBundle: h.workflowBundle, sealingKey: o.sealingKey, webhookAllowTargets: o.webhooks?.allowTargets ?? [], imports });
  stops.push(runWorker(worker).stop);
  // One process with the hosting node keeps the panel's schedules (workers/schedules.ts): the alert
  // evaluation at -metrics-interval on this worker's queue, and the reconciliation passes.
  const keeper = await keepSchedules({
    singleton: 'panelSchedules',
    schedules: [ALERT_EVAL_SCHEDULE_ID, RECONCILE_SCHEDULE_ID],
    databaseUrl: o.databaseUrl ?? connectionSettings(o.db),
    logger: o.logger,
    ensure: async () => {
      if (o.flags.metricsIntervalMs !== null) await ensureAlertEvalSchedule(temporal, o.flags.metricsIntervalMs, webhookSettings(o));
      else await removeAlertEvalSchedule(temporal);
      await ensureReconcileSchedule(temporal, reconcileSettings(o));
    },
  });
  stops.push(() => keeper.stop());
  // Events recorded anywhere (emitEvent) get their webhook deliveries started within seconds.
  const dispatch = setInterval(() => startPendingDeliveries(o.db, temporal, webhookSettings(o)).catch((err) => o.logger.warn({ err }, 'starting webhook deliveries failed')), o.webhooks?.dispatchEveryMs ?? 5000);
  dispatch.unref();
  stops.push(async () => clearInterval(dispatch));
  const resume = setInterval(() => {
    const deps = { db: o.db, temporal, nodeOps: { ...NODE_OP_DEFAULTS, ...o.nodeOps }, logger: o.logger };
    resumePendingOps(deps).catch((err) => o.logger.warn({ err }, 'resuming pending node operations failed'));
    resumePendingDatabaseOps(deps).catch((err) => o.logger.warn({ err }, 'resuming pending database operations failed'));
    resumePendingBackupOps(deps).catch((err) => o.logger.warn({ err }, 'resuming pending backup operations failed'));
  }, h.resumeEveryMs ?? 60_000);
  resume.unref();
  stops.push(async () => clearInterval(resume));
  return node;
}

/** Where webhook deliveries run (the panel worker's queue) and how they are retried. */
export function webhookSettings(o: Pick<PanelRuntimeOptions, 'nodeOps' | 'webhooks'>): WebhookSettings {
  return { taskQueue: o.nodeOps?.taskQueue ?? PANEL_TASK_QUEUE, retry: { ...WEBHOOK_RETRY_DEFAULTS, ...o.webhooks?.retry } };
}
