import { collectDefaultMetrics, Registry } from 'prom-client';

/** The process's one Prometheus registry: the gateway, the panel and the workers may share a process (npm start). */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });
