import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { reconcilePassRunning, startReconcilePass, type ReconcileSettings } from './client';
import { failPass, openPass, passView, runningPass } from './passes';

// `POST /v1/reconcile/run` (spec 2 section 4.1): starts a pass now, idempotent while one runs (the
// running pass is returned). The pass row is inserted before its workflow starts, under the index
// that lets one pass run, so two requests at once start one pass.

export interface RunDeps {
  db: Db;
  temporal: Client;
  settings: ReconcileSettings;
}

export async function runPassNow(d: RunDeps, actor: Actor) {
  if (actor.orgType !== 'platform' || actor.role !== 'platform_admin') throw new PanelError('forbidden', { detail: 'only a platform_admin runs reconciliation passes' });
  if (d.settings.mode === null) throw new PanelError('conflict', { detail: 'reconciliation is off (-reconcile off): start the panel with -reconcile dry-run or -reconcile on' });
  const stale = await runningPass(d.db);
  // a running row whose workflow is gone (its start was lost) must not block passes for ever
  if (stale && !(await reconcilePassRunning(d.temporal, stale.id)) && Date.now() - stale.started_at.getTime() > 60_000) {
    await failPass(d.db, stale.id, 'its workflow is not running');
  }
  const id = randomUUID();
  const { opened, pass } = await openPass(d.db, { id, mode: d.settings.mode, trigger: 'manual' });
  if (!opened) return { started: false, pass: passView(pass) };
  try {
    await startReconcilePass(d.temporal, d.settings, id);
  } catch (err) {
    await failPass(d.db, id, `its workflow could not start: ${(err as Error).message}`);
    throw err;
  }
  return { started: true, pass: passView(pass) };
}
