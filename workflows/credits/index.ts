// The credits worker's bundle: reservation settlement and the hold sweeper.
export * from './reservation';
export * from './sweeper';
