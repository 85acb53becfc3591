#!/usr/bin/env node
// `panel-host` (package.json bin): runs the TypeScript entry point through tsx.
require('tsx/cjs');
require('../main/panel-host.ts');
