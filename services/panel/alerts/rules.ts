import type { Knex } from 'knex';
import { BUILT_IN_RULES, builtInRule, ruleValuesProblem, type BuiltInRule, type RuleValues } from '../../../domain/panel/alerts';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';

// Alert rules (spec 2 sections 2.6, 4.2 "Alert rule change"): the built-in rules with the values an
// operator changed (panel_alert_rules holds a row only for a changed rule; "restore built-in
// values" deletes it). A change applies at the next sample: evaluation reads the rules every time.

type Q = Knex | Knex.Transaction;

export interface EffectiveRule extends BuiltInRule {
  /** whether any value differs from the built-in one */
  changed: boolean;
  updated_at: Date | null;
}

const VALUE_KEYS = ['threshold', 'for_seconds', 'reopen_seconds', 'severity', 'enabled'] as const;
const valuesOf = (r: RuleValues): RuleValues => ({ threshold: r.threshold, for_seconds: r.for_seconds, reopen_seconds: r.reopen_seconds, severity: r.severity, enabled: r.enabled });

/** Every rule as it applies now. */
export async function effectiveRules(q: Q): Promise<EffectiveRule[]> {
  const rows: Array<RuleValues & { key: string; updated_at: Date }> = await q('panel_alert_rules').select('*');
  const byKey = new Map(rows.map((r) => [r.key, r]));
  return BUILT_IN_RULES.map((b) => {
    const row = byKey.get(b.key);
    const values = row ? valuesOf(row) : valuesOf(b);
    return { ...b, ...values, changed: VALUE_KEYS.some((k) => values[k] !== b[k]), updated_at: row?.updated_at ?? null };
  });
}

export const ruleView = (r: EffectiveRule) => ({
  key: r.key,
  condition: r.condition.replace('{threshold}', String(r.threshold)),
  kind: r.kind,
  scope: r.scope,
  unit: r.unit,
  ...valuesOf(r),
  changed: r.changed,
  built_in: valuesOf(builtInRule(r.key)!),
  updated_at: r.updated_at,
});

function requirePlatformAdmin(actor: Actor): void {
  if (!(actor.orgType === 'platform' && actor.role === 'platform_admin')) throw new PanelError('forbidden', { detail: 'only a platform_admin changes alert rules' });
}

async function platformOrg(q: Q) {
  const org = await q('panel_orgs').where({ type: 'platform' }).first('id', 'path');
  if (!org) throw new Error('the platform organisation does not exist yet');
  return org as { id: string; path: string };
}

async function ruleForUpdate(trx: Knex.Transaction, key: string): Promise<EffectiveRule> {
  if (!builtInRule(key)) throw notFound('alert rule');
  await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`panel_alert_rule:${key}`]);
  return (await effectiveRules(trx)).find((r) => r.key === key)!;
}

/** Changes some values of a rule (absent ones stay); applies at the next sample. */
export async function changeRule(db: Db, actor: Actor, key: string, change: Partial<RuleValues>) {
  requirePlatformAdmin(actor);
  if (!VALUE_KEYS.some((k) => change[k] !== undefined)) throw invalid('body', 'nothing to change: give threshold, for_seconds, reopen_seconds, severity or enabled');
  return db.transaction(async (trx) => {
    const before = await ruleForUpdate(trx, key);
    const after = { ...valuesOf(before), ...Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined)) } as RuleValues;
    const problem = ruleValuesProblem(before, after);
    if (problem) throw invalid(problem.field, problem.detail);
    await trx('panel_alert_rules').insert({ key, ...after, updated_at: trx.fn.now() }).onConflict('key').merge();
    await audit(trx, actor, { org: await platformOrg(trx), action: 'alert_rule.change', target: { type: 'alert_rule', id: key }, before: valuesOf(before), after });
    return ruleView((await effectiveRules(trx)).find((r) => r.key === key)!);
  });
}

/** Restores a rule's built-in values. */
export async function restoreRule(db: Db, actor: Actor, key: string) {
  requirePlatformAdmin(actor);
  return db.transaction(async (trx) => {
    const before = await ruleForUpdate(trx, key);
    await trx('panel_alert_rules').where({ key }).delete();
    if (before.changed) await audit(trx, actor, { org: await platformOrg(trx), action: 'alert_rule.restore', target: { type: 'alert_rule', id: key }, before: valuesOf(before), after: valuesOf(builtInRule(key)!) });
    return ruleView((await effectiveRules(trx)).find((r) => r.key === key)!);
  });
}
