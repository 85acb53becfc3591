#!/usr/bin/env node
// `worker` (package.json bin): dist/main/worker.js when built (npm run build), else main/worker.ts through tsx.
require('./run.cjs')('main/worker');
