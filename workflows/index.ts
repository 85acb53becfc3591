export * from './reservation';
export * from './sweeper';
export * from './test-run';
export * from './video';
