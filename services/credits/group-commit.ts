// Group commit (DESIGN.md §2): while `lanes` batch statements are in flight, new items queue;
// when one returns, the queue goes out as the next batch. At c=1 every batch is a batch of one
// and nothing waits; under load the batches grow by themselves. A batch is sent in the same tick
// as submit() when a lane is free (the outcome line relies on it: an outcome leaves before the
// answer's last byte unless a batch of its process is in flight). No timer: a timer would hold
// outcomes in memory, where a kill -9 loses them (measured by the chaos run).

export class GroupCommit<In, Out> {
  private queue: Array<{ item: In; resolve: (o: Out) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();

  /**
   * @param run one statement for the whole batch, one result per item in order; when it throws,
   *   each item of a batch of several is tried again alone, so one bad item fails only itself
   */
  constructor(
    private readonly run: (items: In[]) => Promise<Out[]>,
    private readonly opts: { lanes?: number; maxBatch?: number } = {},
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

  /** Resolves when every batch sent or queued so far has returned. */
  async flush(): Promise<void> {
    while (this.running.size > 0 || this.queue.length > 0) {
      await Promise.all(this.running);
      this.pump();
    }
  }

  private pump(): void {
    while (this.inFlight < (this.opts.lanes ?? 1) && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.opts.maxBatch ?? 500);
      this.inFlight++;
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
