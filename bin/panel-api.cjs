#!/usr/bin/env node
// `panel-api` (package.json bin): dist/main/panel-api-cli.js when built (npm run build), else main/panel-api-cli.ts through tsx.
require('./run.cjs')('main/panel-api-cli');
