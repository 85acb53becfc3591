import { defineSignal } from '@temporalio/workflow';

// Backups at platform level (spec 2 section 8): a restore point extracted for inspection stays 24
// hours in a root-only folder, unless "Remove now" signals its workflow (`inspection-<id>`) earlier.

export const removeInspectionSignal = defineSignal('removeInspectionNow');
