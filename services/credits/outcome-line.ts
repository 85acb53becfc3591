import { Client as PgClient } from 'pg';
import type { Prepared } from '../../platform/db';
import type { Logger } from '../../platform/logger';

// The outcome line: a few pipelined connections of an API process on which each outcome
// statement is written to PostgreSQL synchronously, inside Hold.report(). The API reports before
// it writes the answer's last byte, so when a client has its whole answer, the outcome's bytes
// have already left the process: an API process killed right then has still handed its outcome
// to PostgreSQL, which commits it although the client is gone. Nothing on the client's path waits
// for the result (nor for the disk). Pipelined (pg `pipeline: true`): a statement is sent at once
// even while earlier ones on the connection are still running. A connection that is down sends
// nothing (send() returns null and the caller uses its pool) and is opened again. With one
// connection, the same class carries a process's hold statements (services/credits/holds.ts).

export const OUTCOME_LINE_CONNECTIONS = 4;

export class OutcomeLine {
  private readonly clients: Array<PgClient | null>;
  private next = 0;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly logger: Logger,
    size = OUTCOME_LINE_CONNECTIONS,
    /** what its log lines call it */
    private readonly name = 'outcome line',
  ) {
    this.clients = Array.from({ length: size }, () => null);
  }

  /** Opens the connections; one that cannot be opened (database down) is tried again every second. */
  async start(): Promise<void> {
    await Promise.all(this.clients.map((_, i) => this.open(i)));
  }

  private async open(i: number): Promise<void> {
    if (this.stopped) return;
    const client = new PgClient({ connectionString: this.url, pipeline: true });
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      if (this.clients[i] === client) this.clients[i] = null;
      void client.end().catch(() => {});
      if (this.stopped) return;
      this.logger.warn({ err }, `${this.name} connection lost; opening it again`);
      setTimeout(() => void this.open(i), 1000).unref();
    };
    client.on('error', fail);
    client.on('end', () => fail(new Error('connection ended')));
    try {
      await client.connect();
      if (this.stopped) await client.end();
      else if (!failed) this.clients[i] = client;
    } catch (err) {
      fail(err);
    }
  }

  /** Some connection is up (none: the database is down or unreachable). */
  get connected(): boolean {
    return this.clients.some((c) => c !== null);
  }

  /**
   * Writes the statement to the database now (its bytes have left the process when this returns)
   * and resolves with its result; null when no connection is up.
   */
  send(statement: Prepared, values: readonly unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> | null {
    for (let k = 0; k < this.clients.length; k++) {
      const i = (this.next + k) % this.clients.length;
      const client = this.clients[i];
      if (!client) continue;
      this.next = (i + 1) % this.clients.length;
      return client.query({ name: statement.name, text: statement.text, values: values as unknown[] });
    }
    return null;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const open = this.clients.filter((c): c is PgClient => c !== null);
    this.clients.fill(null);
    await Promise.all(open.map((c) => c.end().catch(() => {})));
  }
}
