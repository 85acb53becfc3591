import { WorkflowExecutionAlreadyStartedError, type ClientInterceptors, type WorkflowClientInterceptor } from '@temporalio/client';
import { Counter } from 'prom-client';
import { registry } from './metrics';
import { tracingClientInterceptor } from './tracing';

// Options for every Temporal Client that starts workflows (main/*.ts): counts each start by
// workflow type and, with tracing on, carries the active span into the workflow.

const starts = new Counter({
  name: 'workflow_starts_total',
  help: 'Workflow starts from this process by workflow type and result: started, already_started (idempotent repeat), failed',
  labelNames: ['workflow_type', 'result'] as const,
  registers: [registry],
});

async function counted<T>(workflowType: string, start: () => Promise<T>): Promise<T> {
  try {
    const r = await start();
    starts.inc({ workflow_type: workflowType, result: 'started' });
    return r;
  } catch (err) {
    starts.inc({ workflow_type: workflowType, result: err instanceof WorkflowExecutionAlreadyStartedError ? 'already_started' : 'failed' });
    throw err;
  }
}

const countStarts: WorkflowClientInterceptor = {
  startWithDetails: (input, next) => counted(input.workflowType, () => next(input)),
  signalWithStart: (input, next) => counted(input.workflowType, () => next(input)),
};

export function observedClientOptions(): { interceptors: ClientInterceptors } {
  const tracing = tracingClientInterceptor();
  // The tracing interceptor first: a failed start is inside its span too.
  return { interceptors: { workflow: tracing ? [tracing, countStarts] : [countStarts] } };
}
