import type { Knex } from 'knex';
import type { Db } from '../../../platform/db';
import type { Actor } from './actor';

// The audit log: every change, written in the same transaction as the change itself.

export interface AuditEntry {
  org: { id: string; path: string };
  action: string;
  target: { type: string; id: string };
  before?: unknown;
  after?: unknown;
}

export async function audit(trx: Knex | Knex.Transaction, actor: Actor | null, e: AuditEntry): Promise<void> {
  await trx('panel_audit').insert({
    request_id: actor?.requestId ?? null,
    actor_login_id: actor?.loginId ?? null,
    actor_username: actor?.username ?? 'system',
    org_id: e.org.id,
    org_path: e.org.path,
    action: e.action,
    target_type: e.target.type,
    target_id: e.target.id,
    before: e.before === undefined ? null : JSON.stringify(e.before),
    after: e.after === undefined ? null : JSON.stringify(e.after),
  });
}

/** The audit entries of an org's subtree, newest first, a page at a time (`before` = an entry id). */
export async function listAudit(db: Db, orgPath: string, page: { limit: number; before?: number }) {
  const q = db('panel_audit').where('org_path', 'like', `${orgPath}%`).orderBy('id', 'desc').limit(page.limit);
  if (page.before) q.andWhere('id', '<', page.before);
  const rows = await q.select('id', 'at', 'request_id', 'actor_login_id', 'actor_username', 'org_id', 'action', 'target_type', 'target_id', 'before', 'after');
  return { entries: rows, next_before: rows.length === page.limit ? rows[rows.length - 1].id : null };
}
