import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { backupAdminRoutes } from './admin-routes';
import { backupRoutes } from './routes';

// The backups area of the panel API: restore points and schedules of sites, and the platform's own
// backup administration on the hosting node (inspection, cleanup, metrics) while this process runs it.

export const backupsArea: PanelArea = {
  routes: (d) => {
    const hostingBackups = () => d.sites?.hostingNode?.()?.backups ?? null;
    const hostingHasSite = async (id: string) => d.sites?.hostingNode?.()?.appliedSite(id) != null;
    return [backupRoutes(sitesDeps(d, d.sites)), backupAdminRoutes({ ...sitesDeps(d, d.sites), hostingBackups, hostingHasSite, inspectionMs: d.backups?.inspectionMs })];
  },
};
