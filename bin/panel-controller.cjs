#!/usr/bin/env node
// `panel-controller` (package.json bin): runs the TypeScript entry point through tsx.
require('tsx/cjs');
require('../admin/panel-controller.ts');
