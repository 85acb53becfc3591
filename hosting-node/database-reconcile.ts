import type { OperationResult } from '../domain/panel/node-ops';
import type { DatabaseInventory } from '../domain/panel/own-node';
import type { Logger } from '../platform/logger';
import { readJson, writeJson } from './files';
import type { MariaDb } from './mariadb';
import type { NodeState } from './node-state';

// Reconciliation of the node's customer databases (OwnNode.databaseInventory, recreateDatabases):
// what MariaDB holds now, and the recreation of a database (empty) and its user that went missing.
// The panel keeps no database password, so the node remembers each customer user's password hash
// (state/db-users.json, mode 600, as MariaDB itself keeps it) when it creates the user, resets its
// password or sees it in a pass: a recreated user keeps the password its owner has. A recreation is
// idempotent by its id (the node's applied operations).

export function createDatabaseReconcile(o: { state: NodeState; mariadb: () => MariaDb | null; logger: Logger }) {
  const { state } = o;
  const file = `${state.paths.state}/db-users.json`;
  const hashes = readJson<Record<string, string>>(file, {});
  const keep = (seen: Map<string, string>) => {
    let changed = false;
    for (const [user, hash] of seen) {
      if (hash && hashes[user] !== hash) {
        hashes[user] = hash;
        changed = true;
      }
    }
    if (changed) writeJson(file, hashes);
  };

  /** the server's customer databases and users; the users' hashes are remembered */
  async function inventory(): Promise<DatabaseInventory | null> {
    const db = o.mariadb();
    if (!db) return null;
    const now = await db.inventory();
    keep(now.users);
    return { databases: now.databases, users: [...now.users.keys()] };
  }

  /** after a create or a password reset: the user's hash as it is now */
  async function remember(user: string): Promise<void> {
    const db = o.mariadb();
    const hash = db ? (await db.inventory()).users.get(user) : undefined;
    if (hash) keep(new Map([[user, hash]]));
  }

  async function recreate(batch: Array<{ opId: string; database: string; user: string; locked: boolean }>): Promise<OperationResult[]> {
    const out: OperationResult[] = [];
    for (const b of batch) {
      if (Object.hasOwn(state.ops, b.opId)) {
        out.push(state.ops[b.opId].result);
        continue;
      }
      const db = o.mariadb();
      let result: OperationResult;
      if (!db) result = { ok: false, error: 'this node runs no MariaDB (no db role)', refused: true };
      else {
        try {
          const r = await db.recreate(b.database, b.user, hashes[b.user] ?? null, b.locked);
          result = { ok: true, detail: { database: b.database, user: b.user, user_recreated: r.userRecreated, password_kept: r.passwordKept } };
        } catch (err) {
          result = { ok: false, error: (err as Error).message, refused: false };
        }
      }
      state.record(b.opId, 'database.reconcile', result);
      o.logger.info({ op: b.opId, database: b.database, ok: result.ok }, 'missing database recreated');
      out.push(result);
    }
    return out;
  }

  return { inventory, remember, recreate };
}
