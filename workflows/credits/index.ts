// The credits worker's bundle: batch settlement, reservations of uncertain outcomes, the hold sweeper.
export * from './reservation';
export * from './settlement';
export * from './sweeper';
export * from './account-webhook';
