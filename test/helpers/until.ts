// The one poll loop of the tests: `until` waits until `check` returns something truthy and returns
// it; on timeout it fails with a message naming `what`. An error `check` throws ends the wait at once.
// `readUntil` is the same loop for a read and a condition on what it read (an HTTP reply, a row).

export async function until<T>(what: string, check: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Reads until `done` holds for what was read, and returns it (which may itself be falsy). */
export async function readUntil<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const [v] = await until(what, async () => {
    const r = await read();
    return done(r) ? ([r] as const) : null;
  }, timeoutMs);
  return v;
}
