#!/usr/bin/env node
// `panel-controller` (package.json bin): dist/admin/panel-controller.js when built (npm run build), else admin/panel-controller.ts through tsx.
require('./run.cjs')('admin/panel-controller');
