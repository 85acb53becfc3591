// The panel worker's bundle: node operations on sites and on customer databases.
export * from './sites/node-op';
export * from './databases/database-op';
export * from './alerts/alerts';
export * from './reconcile/reconcile';
export * from './billing/metering';
export * from './billing/month-close';
export * from './backups/backup-op';
export * from './backups/backup-schedule';
export * from './backups/inspection';
export * from './imports/import';
