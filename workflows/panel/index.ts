// The panel worker's bundle: node operations on sites and on customer databases.
export * from './node-op';
export * from './database-op';
export * from './alerts';
export * from './reconcile';
export * from './metering';
export * from './month-close';
export * from './backup-op';
export * from './backup-schedule';
export * from './inspection';
export * from './import';
