// The test-run worker's bundle.
export * from './run';
