import { MetricsBuffer, Runtime, type BufferedMetricUpdate, type Logger as SdkLogger } from '@temporalio/worker';
import { registry } from './metrics';

// The Temporal SDK's own metrics (Core: workflow and activity task latencies, polls, slots,
// sticky cache, request failures) once per process, before its first NativeConnection:
// - TEMPORAL_METRICS_ADDR=host:port: Core serves them itself at http://host:port/metrics;
// - else, with METRICS on: Core buffers them and this process's /metrics includes them
//   (`temporal_*`), drained every second and at each scrape;
// - METRICS=off: not collected.

export interface TemporalRuntimeSettings {
  logger: SdkLogger;
  /** METRICS: off collects nothing */
  metrics: boolean;
  /** TEMPORAL_METRICS_ADDR */
  prometheusAddress?: string;
}

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

interface Series {
  labels: Record<string, string>;
  value: number;
  buckets: number[];
  sum: number;
}

/** One SDK metric as a prom-client metric; its label sets are whatever Core attaches (they vary by metric). */
class SdkMetric {
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
    private readonly drain: () => void,
  ) {}

  record(u: BufferedMetricUpdate): void {
    const labels: Record<string, string> = {};
    for (const [k, v] of Object.entries(u.attributes)) labels[k.replace(/[^a-zA-Z0-9_]/g, '_')] = String(v);
    const key = JSON.stringify(Object.entries(labels).sort());
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { labels, value: 0, buckets: BUCKETS.map(() => 0), sum: 0 }));
    if (this.type === 'histogram') {
      s.value++;
      s.sum += u.value;
      BUCKETS.forEach((b, i) => (u.value <= b ? s.buckets[i]++ : undefined));
    } else if (u.metric.kind === 'gauge') s.value = u.value;
    else s.value += u.value; // counters and up-down counters send deltas
  }

  async get() {
    this.drain();
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName?: string }> = [];
    for (const s of this.series.values()) {
      if (this.type !== 'histogram') {
        values.push({ labels: s.labels, value: s.value });
        continue;
      }
      BUCKETS.forEach((b, i) => values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: b }, value: s.buckets[i] }));
      values.push({ metricName: `${this.name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.value });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.value });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}

let installed = false;

/** Installs the SDK runtime (once per process; later calls do nothing). */
export function installTemporalRuntime(s: TemporalRuntimeSettings): void {
  if (installed) return;
  installed = true;
  if (s.prometheusAddress) {
    Runtime.install({ logger: s.logger, telemetryOptions: { metrics: { prometheus: { bindAddress: s.prometheusAddress, useSecondsForDurations: true } } } });
    return;
  }
  if (!s.metrics) {
    Runtime.install({ logger: s.logger });
    return;
  }
  const buffer = new MetricsBuffer({ maxBufferSize: 100_000, useSecondsForDurations: true });
  Runtime.install({ logger: s.logger, telemetryOptions: { metrics: { buffer } } });
  const metrics = new Map<string, SdkMetric>();
  const drain = () => {
    for (const u of buffer.retrieveUpdates()) {
      const name = `temporal_${u.metric.name.replace(/^temporal_/, '').replace(/[^a-zA-Z0-9_]/g, '_')}`;
      let m = metrics.get(name);
      if (!m) {
        const type = u.metric.kind === 'histogram' ? 'histogram' : u.metric.kind === 'counter' ? 'counter' : 'gauge';
        m = new SdkMetric(name, u.metric.description || `Temporal SDK metric ${u.metric.name}${u.metric.unit ? ` (${u.metric.unit})` : ''}`, type, drain);
        metrics.set(name, m);
        registry.registerMetric(m as never);
      }
      m.record(u);
    }
  };
  setInterval(drain, 1000).unref();
}
