#!/usr/bin/env node
// `panel-api` (package.json bin): runs the TypeScript entry point through tsx.
require('tsx/cjs');
require('../main/panel-api-cli.ts');
