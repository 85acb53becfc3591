import Router from '@koa/router';
import Koa from 'koa';
import { aliveCheck, readyCheck } from '../shared/health';
import { metricsMiddleware, metricsSettingsFromEnv, registry } from '../shared/metrics';
import { openApiRoutes } from '../shared/openapi-routes';
import { tracingMiddleware } from '../shared/tracing';
import { registerPanelGauges } from '../../services/panel/shared/metrics';
import { alertsArea } from './alerts';
import { backupsArea } from './backups';
import { billingArea } from './billing';
import { certificatesArea } from './certificates';
import { consoleApp } from './console/routes';
import { databasesArea } from './databases';
import { dnsArea } from './dns';
import { importsArea } from './imports';
import { loginsArea } from './logins';
import { nodesArea } from './nodes';
import { panelApi } from './openapi';
import { orgsArea } from './orgs';
import { reconcileArea } from './reconcile';
import { panelAuth } from './shared/auth';
import type { PanelArea, PanelDeps } from './shared/area';
import { panelContext, panelInput } from './shared/http';
import { sitesArea } from './sites';

// The hosting panel's HTTP API (spec 2, PANEL.md): the areas' routers, in the order of AREAS, on
// /v1 behind sign-in (and the few open ones before it), beside /healthz, /readyz, the OpenAPI
// document and the console. A new area adds its folder and one entry to AREAS.

/** The panel API's areas; each serves its own paths, so their order changes no answer. */
const AREAS: PanelArea[] = [loginsArea, orgsArea, nodesArea, dnsArea, sitesArea, certificatesArea, backupsArea, databasesArea, alertsArea, reconcileArea, billingArea, importsArea];

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
  for (const r of AREAS.flatMap((a) => a.open?.(d) ?? [])) {
    app.use(r.routes());
    app.use(r.allowedMethods());
  }

  const v1 = new Router();
  v1.use('/v1', panelAuth({ db: d.db, settings: d.logins.auth }));
  for (const r of AREAS.flatMap((a) => a.routes(d))) {
    v1.use(r.routes());
    v1.use(r.allowedMethods());
  }
  app.use(v1.routes());
  app.use(v1.allowedMethods()); // 405 with Allow for a route's other methods (the routers' own run only once a route matched)
  return app;
}
