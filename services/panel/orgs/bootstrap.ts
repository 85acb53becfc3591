import { randomUUID } from 'node:crypto';
import type { Db } from '../../../platform/db';
import { audit } from '../shared/audit';
import { hashPassword, temporaryPassword } from '../logins/passwords';

/**
 * On an empty panel database: the platform org (the root of the tree) and its first login, `admin`,
 * with a temporary password that must be changed at first sign-in. Returns that password once;
 * null when the platform already exists (another process may have created it a moment ago).
 */
export async function ensurePlatform(db: Db, name = 'Platform'): Promise<{ username: string; password: string } | null> {
  if (await db('panel_orgs').where({ type: 'platform' }).first('id')) return null;
  const password = temporaryPassword();
  const passwordHash = await hashPassword(password);
  const id = randomUUID();
  const created = await db.transaction(async (trx) => {
    const [org] = await trx('panel_orgs').insert({ id, parent_id: null, path: `${id}/`, depth: 0, type: 'platform', name }).onConflict(trx.raw(`(type) WHERE type = 'platform'`)).ignore().returning(['id', 'path']);
    if (!org) return false;
    const loginId = randomUUID();
    await trx('panel_logins').insert({ id: loginId, org_id: id, username: 'admin', password_hash: passwordHash, role: 'platform_admin', must_change_password: true });
    await audit(trx, null, { org, action: 'platform.create', target: { type: 'org', id }, after: { name, first_login: 'admin' } });
    return true;
  });
  return created ? { username: 'admin', password } : null;
}
