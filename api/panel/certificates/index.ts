import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { certificateRoutes } from './routes';

// The certificates area of the panel API: a site's TLS certificate, its key sealed with the
// panel's sealing key.

export const certificatesArea: PanelArea = {
  routes: (d) => [certificateRoutes({ ...sitesDeps(d, d.sites), sealingKey: d.logins.auth.sealingKey })],
};
