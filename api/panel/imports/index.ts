import type { PanelArea } from '../shared/area';
import { importRoutes } from './routes';

// The imports area of the panel API: legacy imports (upload, progress, run), served only when the
// process has their settings.

export const importsArea: PanelArea = {
  routes: (d) => (d.imports ? [importRoutes(d.imports)] : []),
};
