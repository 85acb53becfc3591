#!/usr/bin/env node
// `panelctl` (package.json bin): runs the TypeScript entry point through tsx.
require('tsx/cjs');
require('../admin/panelctl-cli.ts');
