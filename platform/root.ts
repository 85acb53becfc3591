// The project's root directory (node_modules, .tools, temporal-config/), the same whether this code
// runs from its TypeScript sources (tsx) or from the compiled copy in dist/ (npm run build).
import path from 'node:path';

export const COMPILED = path.extname(__filename) === '.js';

export const PROJECT_ROOT = path.resolve(__dirname, COMPILED ? '../..' : '..');
