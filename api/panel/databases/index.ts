import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { databaseRoutes } from './routes';

// The databases area of the panel API: customer databases, run as node operations like sites.

export const databasesArea: PanelArea = {
  routes: (d) => [databaseRoutes(sitesDeps(d, d.sites))],
};
