// Group commit (DESIGN.md §2): while `lanes` batch statements are in flight, new items queue;
// when one returns, the queue goes out as the next batch. At c=1 every batch is a batch of one
// and nothing waits; under load the batches grow by themselves. A batch is sent in the same tick
// as submit() when a lane is free (the outcome line relies on it). With `intervalMs` (only for
// writes no client waits for, each kept outside memory while it waits: the outcome spool of
// services/credits/outcome-journal.ts), batches also leave at most that often, so at moderate
// rates they are not batches of one or two: an item waits at most that long.

export class GroupCommit<In, Out> {
  private queue: Array<{ item: In; resolve: (o: Out) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;
  private lastSent = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly running = new Set<Promise<void>>();

  /**
   * @param run one statement for the whole batch, one result per item in order; when it throws,
   *   each item of a batch of several is tried again alone, so one bad item fails only itself
   */
  constructor(
    private readonly run: (items: In[]) => Promise<Out[]>,
    private readonly opts: { lanes?: number; maxBatch?: number; intervalMs?: number } = {},
  ) {}

  submit(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  /** Items waiting for a lane (not yet sent). */
  get waiting(): number {
    return this.queue.length;
  }

  /** Sends what is queued now (the interval aside) and resolves when every batch sent so far has returned. */
  async flush(): Promise<void> {
    this.pump(true);
    while (this.running.size > 0 || this.queue.length > 0) {
      await Promise.all(this.running);
      this.pump(true);
    }
  }

  private pump(now = false): void {
    while (this.inFlight < (this.opts.lanes ?? 1) && this.queue.length > 0) {
      const wait = this.lastSent + (this.opts.intervalMs ?? 0) - Date.now();
      if (wait > 0 && !now) {
        this.timer ??= setTimeout(() => {
          this.timer = null;
          this.pump();
        }, wait);
        return;
      }
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      const batch = this.queue.splice(0, this.opts.maxBatch ?? 500);
      this.inFlight++;
      this.lastSent = Date.now();
      const sent: Promise<void> = this.send(batch).finally(() => {
        this.inFlight--;
        this.running.delete(sent);
        this.pump();
      });
      this.running.add(sent);
    }
  }

  private async send(batch: GroupCommit<In, Out>['queue']): Promise<void> {
    try {
      const out = await this.run(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(out[i]));
    } catch (err) {
      if (batch.length === 1) return batch[0].reject(err);
      await Promise.all(batch.map((b) => this.run([b.item]).then((o) => b.resolve(o[0]), b.reject)));
    }
  }
}
