import type { PanelArea } from '../shared/area';
import { dnsRoutes } from './routes';

// The DNS area of the panel API: zones of an org and their records.

export const dnsArea: PanelArea = {
  routes: (d) => [dnsRoutes(d.db, d.dns)],
};
