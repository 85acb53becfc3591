import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';

// The area clients' start: resolves once Temporal has the workflow. A workflow already started
// under the same id counts as started, so a repeated start (a retried request) is not an error.

export async function startOnce(start: () => Promise<unknown>): Promise<void> {
  try {
    await start();
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}
