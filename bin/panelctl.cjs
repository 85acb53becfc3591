#!/usr/bin/env node
// `panelctl` (package.json bin): dist/admin/panelctl-cli.js when built (npm run build), else admin/panelctl-cli.ts through tsx.
require('./run.cjs')('admin/panelctl-cli');
