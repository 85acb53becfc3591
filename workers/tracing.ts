import { makeWorkflowExporter, OpenTelemetryActivityInboundInterceptor, OpenTelemetryActivityOutboundInterceptor } from '@temporalio/interceptors-opentelemetry';
import type { WorkerOptions } from '@temporalio/worker';
import { workflowSpanSink } from '../platform/tracing';

/** The workflow interceptors module: part of a domain's bundle when tracing is on (pre-built bundles pass it to bundleWorkflowCode). */
export const WORKFLOW_TRACING_MODULE = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/**
 * A worker's tracing options: spans for each workflow run and activity, parented by the span
 * that started the workflow (the client interceptor's headers). Empty when tracing is off.
 * Workflow spans leave the sandbox through a sink that is not called during replay.
 */
export function workerTracingOptions(bundling = true): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  const sink = workflowSpanSink();
  if (!sink) return {};
  return {
    interceptors: {
      // Only where the worker bundles (workflowsPath): a pre-built bundle has the module already.
      ...(bundling ? { workflowModules: [WORKFLOW_TRACING_MODULE] } : {}),
      activity: [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) })],
    },
    // The interceptor package is typed against SDK 1.x: the processor is 2.x, translated (platform/tracing.ts).
    sinks: { exporter: makeWorkflowExporter(sink.processor as never, sink.resource as never) },
  };
}
