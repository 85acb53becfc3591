import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';

/** What the root hooks started, for every test file. */
export const env = {} as {
  databaseUrl: string;
  temporalAddress: string;
  workflowBundle: WorkflowBundleWithSourceMap;
  logger: Logger;
  db: Db;
  simulator: { url: string; close(): Promise<void> };
};
