import { sitesDeps } from '../../../services/panel/sites/sites';
import type { PanelArea } from '../shared/area';
import { packageRoutes } from './package-routes';
import { orgRoutes } from './routes';
import { orgSettingsRoutes, publicBrandingRoutes } from './settings-routes';

// The orgs area of the panel API: the org tree (deleting an org deletes its sites, hence the sites
// dependencies; so do limits and packages: they reach the sites' control groups), settings and branding (the public branding before the sign-in check), packages.

export const orgsArea: PanelArea = {
  open: (d) => [publicBrandingRoutes(d.db)],
  routes: (d) => [orgRoutes(sitesDeps(d, d.sites)), orgSettingsRoutes(sitesDeps(d, d.sites)), packageRoutes(sitesDeps(d, d.sites))],
};
