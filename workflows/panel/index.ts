// The panel worker's bundle: node operations.
export * from './node-op';
