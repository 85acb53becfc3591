// The node validates and renders with the panel's pure node code (domain/panel/node-ops.ts and
// node-config.ts), the same code the panel uses to know what a node should have on disk. Lint's
// layers let platform/ import only platform/ (eslint-plugin-boundaries does not check re-exports);
// this file is the one place platform/hosting-node reaches into domain/, which is pure and imports
// nothing back, and the rest of platform/hosting-node imports from here.
export * from '../../domain/panel/node-ops';
export * from '../../domain/panel/node-config';
