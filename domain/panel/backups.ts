import type { SearchAttributePair } from '@temporalio/common';
import { defineSignal } from '@temporalio/workflow';
import { SA } from '../shared/search-attributes';

// Backups at platform level (spec 2 section 8): a restore point extracted for inspection stays 24
// hours in a root-only folder, unless "Remove now" signals its workflow (`inspection-<id>`) earlier.

export const removeInspectionSignal = defineSignal('removeInspectionNow');

/** The search attributes a backup operation's workflow (`node-op-<op_id>`) starts with, whoever starts it (the API or a schedule's run). */
export const backupOpSearchAttributes = (o: { orgId: string; node: string; siteId: string; kind: string }): SearchAttributePair[] => [
  { key: SA.OrgId, value: o.orgId },
  { key: SA.NodeName, value: o.node },
  { key: SA.SiteId, value: o.siteId },
  { key: SA.Kind, value: o.kind },
  { key: SA.Status, value: 'pending' },
];
