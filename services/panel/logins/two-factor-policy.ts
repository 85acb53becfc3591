import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { ROLES, type Role } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';

// The roles that must use two-factor sign-in, for the whole platform (spec 2 section 5.2, PANEL.md
// section 2): stored in panel_settings and read on every request by every process, so a change
// binds everywhere at once; -require-2fa-roles only seeds a platform that has no stored value.

const KEY = 'require_two_factor_roles';

/** The stored roles ([] when none is stored). */
export async function twoFactorRoles(db: Db): Promise<Role[]> {
  const row = await db('panel_settings').where({ key: KEY }).first('value');
  return (row?.value as Role[] | undefined) ?? [];
}

/** The flag's roles become the stored value when none is stored yet; a stored value wins. */
export async function seedTwoFactorRoles(db: Db, roles: Role[]): Promise<void> {
  await db('panel_settings').insert({ key: KEY, value: JSON.stringify(roles), updated_by: '-require-2fa-roles' }).onConflict('key').ignore();
}

const policyOf = (row: { value: Role[]; updated_at: Date; updated_by: string } | undefined) => ({ require_roles: row?.value ?? [], roles: ROLES, updated_at: row?.updated_at ?? null, updated_by: row?.updated_by ?? null });

/** Readable by the platform's own logins; 404 below it (its existence is the platform's business). */
export async function getTwoFactorPolicy(db: Db, actor: Actor) {
  if (actor.orgType !== 'platform') throw notFound('setting');
  return policyOf(await db('panel_settings').where({ key: KEY }).first());
}

/** Set by a platform_admin, audited; enforced by every process from the next request. */
export async function setTwoFactorPolicy(db: Db, actor: Actor, roles: string[]) {
  if (actor.orgType !== 'platform') throw notFound('setting');
  if (actor.role !== 'platform_admin') throw new PanelError('forbidden', { detail: 'only a platform_admin sets the two-factor policy' });
  roles.forEach((r, i) => {
    if (!(ROLES as readonly string[]).includes(r)) throw invalid(`require_roles.${i}`, `"${r}" is not a role (${ROLES.join(', ')})`);
  });
  const value = [...new Set(roles)].sort();
  return db.transaction(async (trx) => {
    const before = await trx('panel_settings').where({ key: KEY }).forUpdate().first('value');
    const [row] = await trx('panel_settings')
      .insert({ key: KEY, value: JSON.stringify(value), updated_by: actor.username, updated_at: trx.fn.now() })
      .onConflict('key')
      .merge()
      .returning('*');
    await audit(trx, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'settings.two_factor', target: { type: 'setting', id: KEY }, before: { require_roles: before?.value ?? [] }, after: { require_roles: value } });
    return policyOf(row);
  });
}
