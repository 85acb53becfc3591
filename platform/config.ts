import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { UsageError } from './cli-args';
import { parsePanelFlags, splitFlags } from './panel-flags';

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);
const positive = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** An IP address or a CIDR block (`10.0.0.0/8`, `fd00::/8`). */
export function isIpOrCidr(s: string): boolean {
  const [addr, bits, extra] = s.split('/');
  const family = net.isIP(addr);
  if (!family || extra !== undefined) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}
const ipList = z
  .string()
  .default('')
  .transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean))
  .pipe(z.array(z.string().refine(isIpOrCidr, 'must be a comma-separated list of IP addresses or CIDR blocks')));

/** A PEM file (path) that is read and parsed now, so a wrong one stops the start with its name. */
function pemFile(kind: 'certificate' | 'key') {
  return z.string().min(1).superRefine((file, ctx) => {
    if (!file) return; // said by min(1)
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      return ctx.addIssue({ code: 'custom', message: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` });
    }
    try {
      if (kind === 'key') crypto.createPrivateKey(text);
      else new crypto.X509Certificate(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `${file} is not a PEM ${kind}: ${(err as Error).message}` });
    }
  });
}

// Every environment variable the system reads, with its default. A wrong value stops
// startup with a message that names the variable.
const schema = z.object({
  DATA_DIR: z.string().min(1).default('.data'),
  GATEWAY_PORT: port(8080),
  PANEL_PORT: port(8090),
  // Where the panel's own hosting node serves websites (by Host header).
  PANEL_HOSTING_WEB_PORT: port(8100),
  // Where it serves websites with an attached certificate over HTTPS (by SNI; nginx only).
  PANEL_HOSTING_TLS_PORT: port(8443),
  // Where its own sshd offers SFTP to site owners (issue 34 §2); 0: no SFTP.
  PANEL_HOSTING_SFTP_PORT: port(0),
  // Panel flags `npm start` adds after its own (a later flag wins), checked as panel-api serve checks them.
  PANEL_FLAGS: z.string().default('').superRefine((v, ctx) => {
    try {
      parsePanelFlags(splitFlags(v));
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      ctx.addIssue({ code: 'custom', message: err.message });
    }
  }),
  // Where `npm start`'s panel listens for node agents (panel-host serve -panel http://127.0.0.1:<port>).
  PANEL_NODE_API_PORT: port(8091),
  // Where the hosting node's MariaDB (customer databases) listens, on 127.0.0.1.
  PANEL_HOSTING_DB_PORT: port(8106),
  TEMPORAL_PORT: port(7233),
  TEMPORAL_UI_PORT: port(8233),
  PG_PORT: port(54320),
  SIMULATOR_PORT: port(8199),
  // A simulator already running elsewhere (benchmarks run it in a process of its own): npm start starts none.
  SIMULATOR_URL: z.string().url().optional(),
  DATABASE_URL: z.string().url().optional(),
  TEMPORAL_ADDRESS: z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port').optional(),
  // One namespace per environment (production, staging, …): each its own workflows, schedules and retention.
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  // Encrypted Temporal (docs/configuration.md, Encrypted connections), named as the temporal CLI
  // names them (so setup-namespace.sh reads the same): TLS is on when any TEMPORAL_TLS_* setting or
  // TEMPORAL_API_KEY is set, or TEMPORAL_TLS=true (with the system's CAs).
  TEMPORAL_TLS: z.enum(['true', 'false', '1', '0']).optional().transform((v) => (v === undefined ? undefined : v === 'true' || v === '1')),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: pemFile('certificate').optional(),
  TEMPORAL_TLS_CLIENT_CERT_PATH: pemFile('certificate').optional(),
  TEMPORAL_TLS_CLIENT_KEY_PATH: pemFile('key').optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().regex(/^[A-Za-z0-9.-]+$/, 'must be a host name').optional(),
  // Temporal Cloud's API key (sent as `Authorization: Bearer …`, over TLS).
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  // PostgreSQL over TLS, as libpq's sslmode: require (encrypted), verify-ca (and signed by the CA),
  // verify-full (and the certificate names the host). Unset: as DATABASE_URL says (no TLS by default).
  DATABASE_SSLMODE: z.enum(['disable', 'require', 'verify-ca', 'verify-full']).optional(),
  DATABASE_SSL_CA: pemFile('certificate').optional(),
  TEMPORAL_CLI_PATH: z.string().min(1).optional(),
  GATEWAY_VARIANT: z.enum(['credits', 'keyed']).default('credits'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  // API processes of the gateway role on GATEWAY_PORT (node:cluster); unset: one per core (`gateway`), 1 (`npm start`).
  GATEWAY_PROCESSES: z.coerce.number().int().min(1).max(256).optional(),
  // SIGTERM: how long requests in flight may finish before the rest are cut (docs/credits.md).
  GATEWAY_DRAIN_SECONDS: z.coerce.number().int().min(0).default(30),
  // A model's route is skipped (per API process) after this many consecutive failures within the
  // window, for the cool-down; then one trial request may use it (docs/gateway.md, Routing).
  ROUTE_BREAKER_FAILURES: z.coerce.number().int().positive().default(5),
  ROUTE_BREAKER_WINDOW_MS: z.coerce.number().int().positive().default(60_000),
  ROUTE_BREAKER_COOLDOWN_MS: z.coerce.number().int().positive().default(30_000),
  ROUTE_RETRY_BUDGET_MS: z.coerce.number().int().min(0).default(10_000),
  UPSTREAM_KEY_COOLDOWN_MS: z.coerce.number().int().positive().default(60_000),
  // Outcomes PostgreSQL cannot take wait in DATA_DIR/outcome-journal; past either bound a gateway
  // process refuses new requests with 503 until they are written (docs/credits.md).
  OUTCOME_JOURNAL_MAX_ENTRIES: z.coerce.number().int().positive().default(100_000),
  OUTCOME_JOURNAL_MAX_BYTES: z.coerce.number().int().positive().default(256 * 1024 * 1024),
  OUTCOME_BATCH_INTERVAL_MS: z.coerce.number().int().min(0).max(1000).default(50),
  HOLD_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(900),
  // An API process silent this long is dead: the sweeper releases its holds that have no outcome.
  API_PROCESS_DEAD_AFTER_SECONDS: z.coerce.number().int().min(15).default(60),
  KEY_CACHE_TTL_MS: z.coerce.number().int().positive().default(60_000),
  DB_POOL_MAX: z.coerce.number().int().positive().default(20),
  // Outcomes per settlement workflow at most: unset, 210 on the embedded dev server (its search
  // attribute limit is raised to 8 KB), 50 on a TEMPORAL_ADDRESS cluster at the default 2 KB.
  SETTLEMENT_BATCH_SIZE: z.coerce.number().int().min(1).max(1000).optional(),
  // The pool of each role when it runs alone (else DB_POOL_MAX): gateway, worker, panel-api.
  DB_POOL_MAX_GATEWAY: z.coerce.number().int().positive().optional(),
  DB_POOL_MAX_WORKER: z.coerce.number().int().positive().optional(),
  DB_POOL_MAX_PANEL: z.coerce.number().int().positive().optional(),
  // Load pg_stat_statements into the embedded PostgreSQL (benchmarks count statements per request).
  PG_STAT_STATEMENTS: z.enum(['0', '1']).default('0').transform((v) => v === '1'),
  // Admin HTTP API (/admin/…): unset means every admin request gets 401.
  ADMIN_TOKEN: z.string().min(1).optional(),
  // Test runs (spec 3 B): case executions at once over every project and worker, the lease of a
  // gate slot, and the secret sealing projects' gateway keys (else DATA_DIR/testrun-secret).
  TESTRUN_MAX_CONCURRENCY: z.coerce.number().int().positive().default(16),
  TESTRUN_LEASE_TTL_SECONDS: z.coerce.number().positive().default(30),
  TESTRUN_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  // The gateway test-run cases call (a load balancer's address in a multi-host setup); unset: http://127.0.0.1:GATEWAY_PORT.
  TESTRUN_GATEWAY_URL: z.string().url().optional(),
  // Keyed variant: wrong-key attempts per client IP before a lockout, counted over a window.
  AUTH_FAILURE_LIMIT: positive(20),
  AUTH_FAILURE_WINDOW_SECONDS: positive(60),
  AUTH_LOCKOUT_SECONDS: positive(300),
  // Proxies whose X-Forwarded-For is believed; otherwise the client IP is the socket's.
  TRUSTED_PROXIES: ipList,
  REQUEST_LOG_FLUSH_MS: positive(250),
  REQUEST_LOG_RETENTION_DAYS: positive(90),
  // The response cache's bounds (issue 36 part 4): past either, the oldest answers are evicted.
  RESPONSE_CACHE_MAX_ROWS: positive(100_000),
  RESPONSE_CACHE_MAX_BYTES: positive(256 * 1024 * 1024),
  // 4xx answers are logged at info, at most this many lines per key (or client address) a minute.
  REFUSAL_LOG_LINES_PER_MINUTE: positive(10),
  // CORS for browser clients of /v1: unset (off), `*`, or comma-separated origins.
  CORS_ORIGINS: z
    .string()
    .optional()
    .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim() === '*' ? ('*' as const) : v.split(',').map((x) => x.trim()).filter(Boolean)))
    .pipe(z.union([z.literal('*'), z.array(z.string().regex(/^https?:\/\/[^/\s]+$/, 'must be * or origins like https://app.example.com')), z.undefined()])),
  // Hosting panel: the secret sealing logins' TOTP secrets (else DATA_DIR/panel-secret), and how
  // long a console session lasts without use and at most.
  PANEL_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  PANEL_SESSION_IDLE_MINUTES: positive(720),
  PANEL_SESSION_MAX_HOURS: positive(168),
  // Internal addresses (IPs or CIDR blocks) webhooks may be sent to; every other private, loopback
  // or link-local target is refused.
  PANEL_WEBHOOK_ALLOW_TARGETS: ipList,
  // Internal addresses (IPs, CIDR blocks) that account webhooks of the gateway may target; none by default.
  GATEWAY_WEBHOOK_ALLOW_TARGETS: ipList,
  // The NS names every customer DNS zone lists (comma-separated host names).
  PANEL_DNS_NAMESERVERS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((x) => x.trim().toLowerCase()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^[a-z0-9.-]+\.[a-z]{2,}\.?$/, 'must be comma-separated host names'))),
  // Observability (docs/metrics.md, docs/configuration.md): /metrics on the gateway and panel
  // ports (off hides it; a token requires `Authorization: Bearer <token>`); the Temporal SDK's
  // metrics on an address of their own instead of /metrics; OTLP/HTTP traces when an endpoint is set.
  METRICS: z.enum(['on', 'off']).default('on'),
  METRICS_TOKEN: z.string().min(1).optional(),
  TEMPORAL_METRICS_ADDR: z.string().regex(/^[^:\s]+:\d+$/, 'must be host:port').optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('durable-gateway'),
});

/** NS names of customer zones when PANEL_DNS_NAMESERVERS is unset: placeholders to replace in production. */
export const DEFAULT_NAMESERVERS = ['ns1.panel.invalid', 'ns2.panel.invalid'];

export type Config = z.infer<typeof schema> & { dataDir: string };

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.superRefine(checkTransport).safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return { ...parsed.data, dataDir: path.resolve(parsed.data.DATA_DIR) };
}

/** The settings of encrypted connections that only make sense together. */
function checkTransport(c: z.infer<typeof schema>, ctx: z.RefinementCtx): void {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (!c.TEMPORAL_TLS_CLIENT_CERT_PATH !== !c.TEMPORAL_TLS_CLIENT_KEY_PATH) issue(c.TEMPORAL_TLS_CLIENT_CERT_PATH ? 'TEMPORAL_TLS_CLIENT_KEY_PATH' : 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'the client certificate and its key (mTLS) are set together');
  if (c.TEMPORAL_TLS_CLIENT_CERT_PATH && c.TEMPORAL_TLS_CLIENT_KEY_PATH && !matchingPair(c.TEMPORAL_TLS_CLIENT_CERT_PATH, c.TEMPORAL_TLS_CLIENT_KEY_PATH)) issue('TEMPORAL_TLS_CLIENT_KEY_PATH', `is not the key of the certificate in ${c.TEMPORAL_TLS_CLIENT_CERT_PATH}`);
  const tlsAsked = c.TEMPORAL_TLS_SERVER_CA_CERT_PATH || c.TEMPORAL_TLS_CLIENT_CERT_PATH || c.TEMPORAL_TLS_SERVER_NAME || c.TEMPORAL_API_KEY;
  if (c.TEMPORAL_TLS === false && tlsAsked) issue('TEMPORAL_TLS', 'is false while TLS settings (TEMPORAL_TLS_*, TEMPORAL_API_KEY) are set');
  if ((tlsAsked || c.TEMPORAL_TLS) && !c.TEMPORAL_ADDRESS) issue('TEMPORAL_ADDRESS', 'must be set with TLS settings: the embedded dev server speaks plain gRPC');
  if ((c.DATABASE_SSLMODE || c.DATABASE_SSL_CA) && !c.DATABASE_URL) issue('DATABASE_URL', 'must be set with DATABASE_SSLMODE / DATABASE_SSL_CA: the embedded PostgreSQL runs without TLS');
  if (c.DATABASE_SSL_CA && (c.DATABASE_SSLMODE === undefined || c.DATABASE_SSLMODE === 'disable' || c.DATABASE_SSLMODE === 'require')) issue('DATABASE_SSL_CA', 'is used by DATABASE_SSLMODE verify-ca or verify-full only');
  if (c.DATABASE_SSLMODE && c.DATABASE_URL && /[?&](sslmode|ssl|sslrootcert)=/.test(c.DATABASE_URL)) issue('DATABASE_SSLMODE', 'is set while DATABASE_URL has its own ssl parameters: keep one of them');
}

function matchingPair(certFile: string, keyFile: string): boolean {
  try {
    return new crypto.X509Certificate(fs.readFileSync(certFile)).checkPrivateKey(crypto.createPrivateKey(fs.readFileSync(keyFile)));
  } catch {
    return false; // unreadable files already have their own issue
  }
}

/** The database pool of a role running alone: DB_POOL_MAX_<ROLE>, else DB_POOL_MAX. */
export function poolSize(c: Config, role: 'gateway' | 'worker' | 'panel'): number {
  return { gateway: c.DB_POOL_MAX_GATEWAY, worker: c.DB_POOL_MAX_WORKER, panel: c.DB_POOL_MAX_PANEL }[role] ?? c.DB_POOL_MAX;
}

/** A few settings, validated as loadConfig validates them, for code that needs only those. */
export function loadSettings<K extends keyof z.infer<typeof schema>>(keys: K[], env: NodeJS.ProcessEnv = process.env): Pick<Config, K> {
  const parsed = z.object(Object.fromEntries(keys.map((k) => [k, schema.shape[k]]))).safeParse(env);
  if (!parsed.success) throw new ConfigError(`Invalid configuration:\n${parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  return parsed.data as unknown as Pick<Config, K>;
}
