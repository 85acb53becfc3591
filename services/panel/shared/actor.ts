import type { OrgType, Role } from '../../../domain/panel/tree';

/** Who is acting: the signed-in login (session or API token), its org, and the request id for the audit log. */
export interface Actor {
  loginId: string;
  username: string;
  role: Role;
  orgId: string;
  orgPath: string;
  orgType: OrgType;
  requestId?: string;
}
