import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import type { WorkflowDomain } from '../../workers/base';

/** What the root hooks started, for every test file. */
export const env = {} as {
  databaseUrl: string;
  temporalAddress: string;
  /** one workflow bundle per worker domain (workflows/<domain>/index.ts), built once */
  bundles: Record<WorkflowDomain, WorkflowBundleWithSourceMap>;
  logger: Logger;
  db: Db;
  simulator: { url: string; close(): Promise<void> };
};
