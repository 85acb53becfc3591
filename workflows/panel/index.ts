// The panel worker's bundle: node operations on sites and on customer databases.
export * from './node-op';
export * from './database-op';
export * from './import';
