import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';

// API process liveness (api_processes): a process registers at start, heartbeats while it runs
// and deletes its row when it stops cleanly. Its holds are released only once it is dead.

export const HEARTBEAT_EVERY_MS = 5_000;

export interface ProcessLiveness {
  id: string;
  stop(): Promise<void>;
}

export async function registerApiProcess(db: Db, logger: Logger, everyMs = HEARTBEAT_EVERY_MS): Promise<ProcessLiveness> {
  const id = randomUUID();
  // An upsert, so a process that started while the database was down registers once it is back.
  const beat = () =>
    db('api_processes')
      .insert({ id, host: os.hostname(), pid: process.pid })
      .onConflict('id')
      .merge({ heartbeat_at: db.fn.now() })
      .catch((err) => logger.warn({ err }, 'api process heartbeat failed'));
  await beat();
  const timer = setInterval(() => void beat(), everyMs);
  timer.unref();
  return {
    id,
    async stop() {
      clearInterval(timer);
      await db('api_processes').where({ id }).delete().catch((err) => logger.warn({ err }, 'could not remove the api process row'));
    },
  };
}
