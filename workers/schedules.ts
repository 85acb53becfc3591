import type { Client } from '@temporalio/client';
import type { ClientConfig } from 'pg';
import { HOLD_SWEEPER_SCHEDULE_ID, RESERVATION_TASK_QUEUE } from '../domain/credits/reservation';
import { ensureHoldSweeperSchedule } from '../services/credits/client';
import { startLeader, type Leader, type SingletonName } from '../platform/leader';
import type { Logger } from '../platform/logger';

// Temporal schedules are kept (created, pointed at their queue) by exactly one process per group:
// the holder of the group's singleton lock among the processes that run the group's worker
// (platform/leader.ts). It keeps them when it takes the lock; a process taking over keeps them again.

export interface ScheduleKeeping {
  singleton: Extract<SingletonName, `${string}Schedules`>;
  /** the schedule ids kept, for the logs */
  schedules: string[];
  /** creates or updates them (idempotent) */
  ensure(): Promise<void>;
}

/** Competes for the group's lock; the leader keeps its schedules (retried every few seconds until done). */
export function keepSchedules(o: ScheduleKeeping & { databaseUrl: string | ClientConfig; logger: Logger }): Promise<Leader> {
  return startLeader({
    singleton: o.singleton,
    databaseUrl: o.databaseUrl,
    logger: o.logger,
    tick: async (_client, gained) => {
      if (!gained) return;
      await o.ensure();
      o.logger.info({ singleton: o.singleton, schedules: o.schedules }, 'schedules kept');
    },
  });
}

/** The credits schedules (the hold sweeper), kept by one process running the credits worker. */
export const creditsSchedules = (temporal: Client): ScheduleKeeping => ({
  singleton: 'creditsSchedules',
  schedules: [HOLD_SWEEPER_SCHEDULE_ID],
  ensure: () => ensureHoldSweeperSchedule(temporal, RESERVATION_TASK_QUEUE),
});
