#!/usr/bin/env node
// `gateway` (package.json bin): dist/main/gateway-cli.js when built (npm run build), else main/gateway-cli.ts through tsx.
require('./run.cjs')('main/gateway-cli');
