import { RECONCILE_DEFAULTS } from '../../../services/panel/reconcile/client';
import type { PanelArea } from '../shared/area';
import { reconcileRoutes } from './routes';

// The reconcile area of the panel API: passes over the hosting node's sites (-reconcile; off when
// the process has no settings) and the sites' policies.

export const reconcileArea: PanelArea = {
  routes: (d) => [reconcileRoutes({ db: d.db, temporal: d.temporal, settings: d.reconcile ?? { ...RECONCILE_DEFAULTS, mode: null } })],
};
