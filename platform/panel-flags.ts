import fs from 'node:fs';
import { z } from 'zod';
import { parseFlags, UsageError } from './cli-args';

// The flags of `panel-api serve` (spec 2 section 4.3), spelled as the spec spells them
// (`-metrics-interval 60s`; `--metrics-interval=60s` works too), parsed into one typed object.
// A bad value stops the command with a message naming the flag.

const ROLES = ['platform_admin', 'provider_admin', 'reseller', 'account_owner', 'read_only'] as const;

export interface PanelFlags {
  /** metrics sampling interval; null: off (and so no alerts) */
  metricsIntervalMs: number | null;
  /** reconciliation: observe and report, or also remediate opted-in sites; null: off */
  reconcile: 'dry-run' | 'on' | null;
  /** -reconcile-interval: how often the schedule runs a pass; null: the default (15 min) */
  reconcileIntervalMs?: number | null;
  placement: 'scheduled' | null;
  placementNodeFacts: string | null;
  nodeApiListen: { host: string; port: number } | null;
  billingMeter: boolean;
  requireTwoFactorRoles: Array<(typeof ROLES)[number]>;
  controllerState: boolean;
  /**
   * -no-hosting-node: this process runs neither the panel's own hosting node nor the panel worker
   * beside it (one other panel-api does): the API, the node API and a controller candidate only
   */
  noHostingNode: boolean;
}

/**
 * The flags of `<command> serve …`: anything but `serve` prints the usage and exits 2, and so does a
 * bad flag (after naming it), as command-line tools do.
 */
export function serveFlags<T>(command: string, usage: string, argv: string[], parse: (args: string[]) => T): T {
  if (argv[0] !== 'serve') {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  try {
    return parse(argv.slice(1));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${command}: ${err.message}\n${usage}\n`);
    process.exit(2);
  }
}

const PANEL_FLAGS = {
  'metrics-interval': { type: 'string' },
  reconcile: { type: 'string' },
  'reconcile-interval': { type: 'string' },
  placement: { type: 'string' },
  'placement-node-facts': { type: 'string' },
  'node-api-listen': { type: 'string' },
  'require-2fa-roles': { type: 'string' },
  'billing-meter': { type: 'boolean' },
  'controller-state': { type: 'boolean' },
  'no-hosting-node': { type: 'boolean' },
} as const;

/** `60s`, `5m`, `1h`, `500ms`, or a number of seconds; at least 1 s. */
export function parseDuration(v: string): number | null {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) return null;
  const n = Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  return n >= 1000 && n <= 86_400_000 ? Math.round(n) : null;
}

const nodeFactsFile = z.object({
  nodes: z.array(z.object({ node: z.string().min(1), preflight_passed: z.boolean(), checked_at: z.iso.datetime({ offset: true }), php_versions: z.array(z.string()) })),
});

/** The arguments of a PANEL_FLAGS value (`npm start`): separated by white space, as a shell would without quotes. */
export const splitFlags = (raw: string): string[] => raw.split(/\s+/).filter(Boolean);

export function parsePanelFlags(argv: string[]): PanelFlags {
  const flags: PanelFlags = { metricsIntervalMs: null, reconcile: null, placement: null, placementNodeFacts: null, nodeApiListen: null, billingMeter: false, requireTwoFactorRoles: [], controllerState: false, noHostingNode: false };
  const { values } = parseFlags(argv, PANEL_FLAGS, { dash: '-' });
  flags.billingMeter = values['billing-meter'] ?? false;
  flags.controllerState = values['controller-state'] ?? false;
  flags.noHostingNode = values['no-hosting-node'] ?? false;
  for (const [name, value] of Object.entries(values)) if (typeof value === 'string') apply(flags, name, value);
  return flags;
}

function apply(f: PanelFlags, name: string, v: string): void {
  const bad = (why: string) => new UsageError(`-${name} ${JSON.stringify(v)}: ${why}`);
  switch (name) {
    case 'metrics-interval': {
      if (v === 'off' || v === '0') return void (f.metricsIntervalMs = null);
      const ms = parseDuration(v);
      if (ms === null) throw bad('a duration from 1s to 24h, such as 60s, 5m or 1h (or off)');
      f.metricsIntervalMs = ms;
      return;
    }
    case 'reconcile':
      if (v !== 'dry-run' && v !== 'on' && v !== 'off') throw bad('dry-run (observe and report), on (also remediate opted-in sites) or off');
      f.reconcile = v === 'off' ? null : v;
      return;
    case 'reconcile-interval': {
      const ms = parseDuration(v);
      if (ms === null || ms < 10_000) throw bad('a duration from 10s to 24h, such as 15m or 1h');
      f.reconcileIntervalMs = ms;
      return;
    }
    case 'placement':
      if (v !== 'scheduled') throw bad('the only placement mode is "scheduled"');
      f.placement = 'scheduled';
      return;
    case 'placement-node-facts': {
      let parsed: unknown;
      try {
        parsed = JSON.parse(fs.readFileSync(v, 'utf8'));
      } catch (err) {
        throw bad(`cannot be read as JSON (${(err as Error).message})`);
      }
      const r = nodeFactsFile.safeParse(parsed);
      if (!r.success) throw bad(`not a node facts file: ${r.error.issues[0].path.join('.')} ${r.error.issues[0].message} (shape: { nodes: [ { node, preflight_passed, checked_at, php_versions } ] })`);
      f.placementNodeFacts = v;
      return;
    }
    case 'node-api-listen': {
      const m = /^(?:([^:]*)|\[([0-9a-f:]+)\]):(\d{1,5})$/i.exec(v);
      const port = m ? Number(m[3]) : NaN;
      if (!m || port > 65535) throw bad('an address host:port, such as 0.0.0.0:8091 or :8091');
      f.nodeApiListen = { host: m[1] || m[2] || '0.0.0.0', port };
      return;
    }
    case 'require-2fa-roles': {
      const roles = v.split(',').map((s) => s.trim()).filter(Boolean);
      const unknown = roles.filter((r) => !(ROLES as readonly string[]).includes(r));
      if (unknown.length) throw bad(`unknown role ${unknown.join(', ')} (roles: ${ROLES.join(', ')})`);
      f.requireTwoFactorRoles = [...new Set(roles)] as PanelFlags['requireTwoFactorRoles'];
      return;
    }
  }
}
