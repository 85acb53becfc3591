import { Gauge, type Registry } from 'prom-client';
import type { Db } from '../../../platform/db';

const CACHE_MS = 5000;

interface Row { metric: string; label: string; n: string }

/**
 * Panel gauges read from PostgreSQL at scrape time: one grouped query per table, cached a few
 * seconds so frequent scrapes stay cheap. Registered once per registry; the latest panel's db wins
 * (one panel per process outside tests).
 */
export function registerPanelGauges(registry: Registry, db: Db): void {
  if (state.db !== db) Object.assign(state, { db, at: 0 }); // another db: nothing cached is its
  if (registry.getSingleMetric('panel_nodes')) return;
  const gauges = {
    panel_nodes: new Gauge({ name: 'panel_nodes', help: 'Hosting nodes by controller state (alive, suspect, dead)', labelNames: ['state'], registers: [registry], collect: () => refresh() }),
    panel_alerts: new Gauge({ name: 'panel_alerts', help: 'Alerts not resolved, by state (open, acknowledged)', labelNames: ['state'], registers: [registry] }),
    panel_reconcile_sites: new Gauge({ name: 'panel_reconcile_sites', help: 'Sites by their last reconciliation finding status', labelNames: ['status'], registers: [registry] }),
    panel_imports: new Gauge({ name: 'panel_imports', help: 'Legacy imports by status', labelNames: ['status'], registers: [registry] }),
    panel_import_items: new Gauge({ name: 'panel_import_items', help: 'Import items by state (import progress)', labelNames: ['state'], registers: [registry] }),
  };
  // prom-client awaits panel_nodes' collect() on each scrape; it refreshes all five gauges.
  async function refresh() {
    if (Date.now() - state.at < CACHE_MS || !state.db) return;
    state.at = Date.now();
    const { rows }: { rows: Row[] } = await state.db.raw(`
      SELECT 'panel_nodes' AS metric, state AS label, count(*) AS n FROM panel_nodes GROUP BY state
      UNION ALL SELECT 'panel_alerts', state, count(*) FROM panel_alerts WHERE state <> 'resolved' GROUP BY state
      UNION ALL SELECT 'panel_reconcile_sites', coalesce(status, 'none'), count(*) FROM panel_reconcile_sites GROUP BY status
      UNION ALL SELECT 'panel_imports', status, count(*) FROM panel_imports GROUP BY status
      UNION ALL SELECT 'panel_import_items', state, count(*) FROM panel_import_items GROUP BY state`);
    for (const g of Object.values(gauges)) g.reset();
    const labelName = { panel_nodes: 'state', panel_alerts: 'state', panel_reconcile_sites: 'status', panel_imports: 'status', panel_import_items: 'state' } as const;
    for (const r of rows) {
      const key = r.metric as keyof typeof gauges;
      (gauges[key] as Gauge<string>).set({ [labelName[key]]: r.label }, Number(r.n));
    }
  }
}

const state: { db: Db | null; at: number } = { db: null, at: 0 };
