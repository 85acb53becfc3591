import type { PanelArea, PanelDeps } from '../shared/area';
import { accountRoutes, signInRoutes } from './account-routes';
import { loginRoutes } from './routes';

// The logins area of the panel API: sign-in (served before the sign-in check), the caller's own
// account, and the logins of orgs.

const account = (d: PanelDeps) => ({ db: d.db, settings: d.logins.auth, issuer: d.logins.issuer, secureCookies: d.logins.secureCookies });

export const loginsArea: PanelArea = {
  open: (d) => [signInRoutes(account(d))],
  routes: (d) => [accountRoutes(account(d)), loginRoutes(d.db)],
};
