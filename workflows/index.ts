export * from './reservation';
export * from './sweeper';
