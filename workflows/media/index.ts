// The media worker's bundle: video jobs.
export * from './video';
