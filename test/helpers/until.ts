// The one poll loop of the tests: waits until `check` returns something truthy and returns it; on
// timeout it fails with a message naming `what`. An error `check` throws ends the wait at once.

export async function until<T>(what: string, check: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
