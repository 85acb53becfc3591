import { context, createContextKey, propagation, trace, type Attributes, type Link, type SpanContext } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';

// OpenTelemetry traces, exported by OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set. Off
// otherwise: no provider is registered, no middleware or interceptor is installed, so the
// @opentelemetry/api calls that remain are its no-ops.

interface Active {
  provider: NodeTracerProvider;
  processor: SpanProcessor;
  resource: Resource;
}

let active: Active | null = null;

export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL; spans go to `<endpoint>/v1/traces` */
  endpoint: string | undefined;
  /** OTEL_SERVICE_NAME */
  serviceName: string;
}

/** Registers the process's tracer provider (once; a second call keeps the first). False when tracing is off. */
export function startTracing(s: TracingSettings): boolean {
  if (active) return true;
  if (!s.endpoint) return false;
  const resource = resourceFromAttributes({ [ATTR_SERVICE_NAME]: s.serviceName });
  const processor = new BatchSpanProcessor(new OTLPTraceExporter({ url: `${s.endpoint.replace(/\/+$/, '')}/v1/traces` }), { scheduledDelayMillis: 1000 });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register(); // AsyncLocalStorage context manager and the W3C trace-context propagator
  active = { provider, processor, resource };
  return true;
}

export function tracingEnabled(): boolean {
  return active !== null;
}

/** Exports what is buffered (tests, shutdown). */
export async function flushTracing(): Promise<void> {
  await active?.provider.forceFlush();
}

/** Flushes and unregisters the provider: the process is back to the no-op API. */
export async function stopTracing(): Promise<void> {
  if (!active) return;
  const a = active;
  active = null;
  await a.provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
}

/**
 * The span processor and resource for the workflow span sink (workers/tracing.ts). Workflow
 * spans come out of the sandbox in the interceptor package's SDK 1.x shape (parentSpanId,
 * instrumentationLibrary): translated to the 2.x shape the OTLP exporter reads, else they would
 * lose their parent.
 */
export function workflowSpanSink(): { processor: SpanProcessor; resource: Resource } | null {
  if (!active) return null;
  const { processor, resource } = active;
  type V1Span = ReadableSpan & { parentSpanId?: string; instrumentationLibrary?: ReadableSpan['instrumentationScope'] };
  const translate = (s: V1Span): ReadableSpan => {
    const ctx = s.spanContext();
    return {
      ...s,
      spanContext: () => ctx,
      parentSpanContext: s.parentSpanContext ?? (s.parentSpanId ? { traceId: ctx.traceId, spanId: s.parentSpanId, traceFlags: ctx.traceFlags } : undefined),
      instrumentationScope: s.instrumentationScope ?? s.instrumentationLibrary ?? { name: '@temporalio/interceptor-workflow' },
    };
  };
  return {
    resource,
    processor: {
      onStart: () => {},
      onEnd: (span) => processor.onEnd(translate(span as V1Span)),
      forceFlush: () => processor.forceFlush(),
      shutdown: async () => {}, // the provider owns the processor
    },
  };
}

/** The active span's context as a W3C traceparent, to carry it where the async context does not reach (the outbox). */
export function currentTraceparent(): string | undefined {
  if (!active) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** A span link to each recorded traceparent (malformed or absent ones are skipped). */
export function linksTo(traceparents: Array<string | undefined>): Link[] {
  const links: Link[] = [];
  for (const tp of traceparents) {
    if (!tp) continue;
    const sc: SpanContext | undefined = trace.getSpanContext(propagation.extract(context.active(), { traceparent: tp }));
    if (sc && trace.isSpanContextValid(sc)) links.push({ context: sc });
  }
  return links;
}

/** The client interceptor that carries the active span to the workflows a client starts; null when tracing is off. */
export function tracingClientInterceptor(): OpenTelemetryWorkflowClientInterceptor | null {
  return active ? new OpenTelemetryWorkflowClientInterceptor() : null;
}

const ATTEMPT = createContextKey('gateway.upstream_attempt');

/** Runs fn with attributes for the provider call it makes (the route attempt: index, fallback), which that call's client span carries. */
export function withAttemptAttributes<T>(attributes: Attributes, fn: () => T): T {
  return context.with(context.active().setValue(ATTEMPT, attributes), fn);
}

/** The attributes withAttemptAttributes set for the current provider call (none outside one). */
export function attemptAttributes(): Attributes {
  return (context.active().getValue(ATTEMPT) as Attributes | undefined) ?? {};
}
