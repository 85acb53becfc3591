import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { quotaRoutes } from './quota-routes';
import { siteRoutes } from './routes';
import { sftpRoutes } from './sftp-routes';

// The sites area of the panel API: websites and their node operations, and disk usage (read from
// the panel's own hosting node while this process runs it), SFTP keys and endpoint.

export const sitesArea: PanelArea = {
  routes: (d) => [siteRoutes(sitesDeps(d, d.sites)), sftpRoutes(sitesDeps(d, d.sites)), quotaRoutes({ db: d.db, hostingNode: d.sites?.hostingNode ?? (() => null) })],
};
