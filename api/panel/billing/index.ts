import { BILLING_TASK_QUEUE } from '../../../domain/panel/workflows';
import type { PanelArea } from '../shared/area';
import { billingRoutes } from './routes';

// The billing area of the panel API: plans, statements and Close month (-billing-meter; off when
// the process has no settings).

export const billingArea: PanelArea = {
  routes: (d) => [billingRoutes({ db: d.db, temporal: d.temporal, settings: d.billing ?? { metering: false, clock: () => new Date(), taskQueue: BILLING_TASK_QUEUE } })],
};
