import type { PanelArea } from '../shared/area';
import { alertRoutes } from './routes';
import { webhookRoutes } from './webhook-routes';

// The alerts area of the panel API: alerts, rules and metric charts (-metrics-interval), and the
// webhook endpoints and deliveries (served once webhooks are configured).

export const alertsArea: PanelArea = {
  routes: (d) => [alertRoutes({ db: d.db, metricsIntervalMs: d.alerts?.metricsIntervalMs ?? null }), ...(d.alerts?.webhooks ? [webhookRoutes({ db: d.db, temporal: d.temporal, ...d.alerts.webhooks })] : [])],
};
