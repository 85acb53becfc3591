import type { Client } from '@temporalio/client';
import { RESERVATION_TASK_QUEUE } from '../domain/credits/reservation';
import { ensureHoldSweeperSchedule } from '../services/credits/client';

/** Every Temporal schedule of the system, created at start (each domain's client owns its own). */
export async function ensureSchedules(temporal: Client): Promise<void> {
  await ensureHoldSweeperSchedule(temporal, RESERVATION_TASK_QUEUE);
}
