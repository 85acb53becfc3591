#!/usr/bin/env node
// `start` (package.json bin): every role in one process tree, as `npm start`; dist/main/start.js when built, else main/start.ts through tsx.
require('./run.cjs')('main/start');
