import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { capacityRoutes } from './capacity-routes';
import { clusterRoutes } from './cluster-routes';

// The nodes area of the panel API on the panel's port: declared capacity and the cluster pages
// (node records with -controller-state). The agents' own API is node-app.ts, on its own port.

export const nodesArea: PanelArea = {
  routes: (d) => [capacityRoutes(d.db), clusterRoutes({ db: d.db, controllerState: d.nodes?.controllerState ?? false, sites: sitesDeps(d, d.sites) })],
};
