#!/usr/bin/env node
// `panel-host` (package.json bin): dist/main/panel-host.js when built (npm run build), else main/panel-host.ts through tsx.
require('./run.cjs')('main/panel-host');
