// The org tree's rules (spec 2 sections 1, 2.1, 2.2): which org types sit under which, which roles
// a login of each type may have, and the powers. Pure: used by services, the API and the console.

export const ORG_TYPES = ['platform', 'provider', 'reseller', 'customer'] as const;
export type OrgType = (typeof ORG_TYPES)[number];

export const ROLES = ['platform_admin', 'provider_admin', 'reseller', 'account_owner', 'read_only'] as const;
export type Role = (typeof ROLES)[number];

/** The admin role of each org type; every org may also have read_only logins. */
export const ADMIN_ROLE: Record<OrgType, Role> = {
  platform: 'platform_admin',
  provider: 'provider_admin',
  reseller: 'reseller',
  customer: 'account_owner',
};

export const rolesFor = (type: OrgType): Role[] => [ADMIN_ROLE[type], 'read_only'];

/** Powers a parent grants to the resellers below it (providers and the platform hold them all). */
export const DELEGABLE_POWERS = ['create_subresellers', 'create_packages', 'set_branding'] as const;
export type DelegablePower = (typeof DELEGABLE_POWERS)[number];

/** Powers of a login's role: `site.place` and `php.admin` need a grant at the root of the tree. */
export const ROLE_POWERS = ['site.place', 'php.admin', 'migration.run'] as const;
export type RolePower = (typeof ROLE_POWERS)[number];

export function rolePowers(role: Role, orgType: OrgType): RolePower[] {
  if (role === 'read_only') return [];
  if (orgType === 'platform') return ['site.place', 'php.admin', 'migration.run'];
  if (orgType === 'provider' || orgType === 'reseller') return ['migration.run'];
  return [];
}

/** Which child types an org of a type may create, before delegation is considered. */
export function childTypes(type: OrgType): OrgType[] {
  switch (type) {
    case 'platform':
      return ['provider'];
    case 'provider':
      return ['reseller', 'customer'];
    case 'reseller':
      return ['reseller', 'customer'];
    case 'customer':
      return [];
  }
}

/**
 * The delegable powers an org holds: the platform and providers hold all; a reseller holds what
 * it was granted and every level above it holds too (a reseller never holds a power its parent
 * lacks); customers hold none. `chain` is root first, ending with the org itself.
 */
export function effectivePowers(chain: Array<{ type: OrgType; powers: string[] }>): DelegablePower[] {
  let held = new Set<DelegablePower>(DELEGABLE_POWERS);
  for (const org of chain) {
    if (org.type === 'customer') held = new Set();
    else if (org.type === 'reseller') held = new Set([...held].filter((p) => org.powers.includes(p)));
  }
  return DELEGABLE_POWERS.filter((p) => held.has(p));
}

/** `a/b/c/` → ['a', 'b', 'c']: the ids of an org's path, root first, itself last. */
export const pathIds = (path: string): string[] => path.split('/').filter(Boolean);

/** Whether `path` lies strictly below the org whose path is `ancestorPath`. */
export const isBelow = (path: string, ancestorPath: string): boolean => path.length > ancestorPath.length && path.startsWith(ancestorPath);
