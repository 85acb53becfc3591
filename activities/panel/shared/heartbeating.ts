import { Context } from '@temporalio/activity';

// Long node work (a site's archive, a database dump or load, an extraction, an nginx reload) and
// long transactions heartbeat while they run: a worker that dies mid-way is noticed within the
// activity's heartbeat timeout (seconds) and the activity is retried, instead of at its start-to-close timeout.

/** Runs `work` while heartbeating every second. */
export async function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timer = setInterval(() => ctx.heartbeat(), 1000);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
