import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { SA } from '../../domain/shared/search-attributes';
import { testRunWorkflowId, type Configuration, type TestRunInput } from '../../domain/testruns/runs';
import type { WorkflowOf } from '../../domain/shared/workflow-of';

// The one place that starts, cancels and inspects test-run workflows (`test-run-<run_id>`).

export interface RunStart {
  input: TestRunInput;
  taskQueue: string;
  configuration: Configuration;
  memo: Record<string, unknown>;
}

/** Starts the run's workflow; a run already started is left as it is (the id is the run id). */
export async function startTestRun(temporal: Client, s: RunStart): Promise<void> {
  try {
    await temporal.workflow.start<WorkflowOf<TestRunInput>>('testRunWorkflow', {
      workflowId: testRunWorkflowId(s.input.runId),
      taskQueue: s.taskQueue,
      args: [s.input],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      // Never a second execution of a run whose workflow has closed (GET finishes such a run).
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      // A workflow that never got a worker does not wait forever: past this the API reports the run timed_out.
      workflowExecutionTimeout: Math.round(s.configuration.deadline_seconds * 1000) + 10 * 60_000,
      typedSearchAttributes: [
        { key: SA.ProjectId, value: s.input.projectId },
        { key: SA.Status, value: 'queued' },
      ],
      memo: s.memo,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Cancels the run's workflow; false when it does not exist. */
export async function cancelTestRun(temporal: Client, runId: string): Promise<boolean> {
  try {
    await temporal.workflow.getHandle(testRunWorkflowId(runId)).cancel();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** The run workflow's status name (RUNNING, COMPLETED, TERMINATED, …), or null when it does not exist. */
export async function testRunWorkflowStatus(temporal: Client, workflowId: string): Promise<string | null> {
  try {
    return (await temporal.workflow.getHandle(workflowId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
}
