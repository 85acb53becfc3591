import { z } from 'zod';
import { header, healthOperations, type ApiDescription, type ApiOperation, type Method } from '../shared/openapi';
import * as alerts from './alerts/routes';
import * as webhooks from './alerts/webhook-routes';
import * as billing from './billing/routes';
import * as imports from './imports/routes';
import * as account from './logins/account-routes';
import * as logins from './logins/routes';
import * as capacity from './nodes/capacity-routes';
import * as cluster from './nodes/cluster-routes';
import * as packages from './orgs/package-routes';
import * as orgs from './orgs/routes';
import * as settings from './orgs/settings-routes';
import * as reconcile from './reconcile/routes';
import * as backups from './backups/routes';
import * as certificates from './certificates/routes';
import * as databases from './databases/routes';
import * as dns from './dns/routes';
import * as files from './sites/quota-routes';
import * as sites from './sites/routes';
import * as sftp from './sites/sftp-routes';

/** The panel's error body (domain/panel/errors.ts PanelError). */
const panelErrorBody = z
  .object({ error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()) }) })
  .meta({ id: 'PanelError', description: 'The panel error body' });

type Extra = Omit<ApiOperation, 'method' | 'path' | 'summary' | 'tags'>;
/** one operation of a tag: op('orgs')('get', '/v1/orgs', 'List', {...}) */
const op =
  (tag: string) =>
  (method: Method, path: string, summary: string, extra: Extra = {}): ApiOperation => ({ method, path, summary, tags: [tag], ...extra });

const o = op('orgs');
const l = op('logins');
const a = op('account');
const n = op('cluster');
const s = op('sites');
const b = op('backups');
const d = op('dns');
const dbs = op('databases');
const al = op('alerts');
const w = op('webhooks');
const rc = op('reconcile');
const bl = op('billing');
const im = op('imports');
const done = { status: 204, responseType: null } as const;
const accepted = { status: 202 } as const;
const created = { status: 201 } as const;

const operations: ApiOperation[] = [
  ...healthOperations,
  a('post', '/v1/auth/sign-in', 'Sign in: sets the session cookie; the CSRF token is in x-csrf-token', {
    body: account.signInBody,
    security: [],
    responseHeaders: z.object({ 'x-csrf-token': header('The CSRF token a cookie session sends back on every change') }),
  }),
  a('post', '/v1/auth/sign-out', 'Sign out (ends the session)', done),
  a('get', '/v1/account', "The caller's login, org and powers"),
  a('post', '/v1/account/password', 'Change the own password', { body: account.passwordBody, ...done }),
  a('post', '/v1/account/two-factor', 'Start two-factor enrolment (secret and otpauth URI)'),
  a('post', '/v1/account/two-factor/confirm', 'Confirm two-factor enrolment with a code', { body: account.codeBody }),
  a('get', '/v1/account/tokens', 'The own API tokens'),
  a('post', '/v1/account/tokens', 'Create an API token (shown once)', { body: account.tokenBody, ...created }),
  a('delete', '/v1/account/tokens/:id', 'Revoke an own API token', done),
  op('branding')('get', '/v1/branding', 'Public branding of the sign-in page for a host name', { query: settings.publicBrandingQuery, security: [] }),

  o('get', '/v1/orgs', 'Orgs of the subtree', { query: orgs.listQuery }),
  o('post', '/v1/orgs', 'Create an org below, with its first login', { body: orgs.createBody, ...created }),
  o('get', '/v1/orgs/:id', 'An org'),
  o('patch', '/v1/orgs/:id', 'Rename an org', { body: orgs.renameBody }),
  o('delete', '/v1/orgs/:id', 'Delete an org (confirm with its name)', { body: orgs.deleteBody, ...done }),
  o('post', '/v1/orgs/:id/suspend', 'Suspend an org'),
  o('post', '/v1/orgs/:id/reactivate', 'Reactivate an org'),
  o('get', '/v1/orgs/:id/audit', "The subtree's audit log", { query: orgs.auditQuery }),
  o('get', '/v1/orgs/:id/limits', "An org's limits"),
  o('put', '/v1/orgs/:id/limits', "Set an org's limits", { body: settings.limitsBody }),
  o('put', '/v1/orgs/:id/powers', "Set an org's delegated powers", { body: settings.powersBody }),
  o('put', '/v1/orgs/:id/regions', "Set an org's preferred and required regions", { body: settings.regionsBody }),
  o('get', '/v1/orgs/:id/branding', "An org's branding"),
  o('put', '/v1/orgs/:id/branding', "Set an org's branding", { body: settings.brandingBody }),
  o('get', '/v1/orgs/:id/packages', 'Packages listed to an org'),
  o('post', '/v1/orgs/:id/packages', 'Create a package', { body: packages.packageBody, ...created }),
  o('put', '/v1/orgs/:id/package', 'Assign a package (null: custom limits)', { body: packages.assignBody }),
  o('get', '/v1/packages/:id', 'A package'),
  o('patch', '/v1/packages/:id', 'Edit a package (limits replaced whole)', { body: packages.packagePatchBody }),
  o('delete', '/v1/packages/:id', 'Delete an unused package', done),
  o('get', '/v1/orgs/:id/usage', "An account's usage against its limits"),

  l('get', '/v1/orgs/:id/logins', "An org's logins"),
  l('post', '/v1/orgs/:id/logins', 'Create a login', { body: logins.createBody, ...created }),
  l('get', '/v1/platform/two-factor-policy', 'The roles that must use two-factor sign-in, platform-wide'),
  l('put', '/v1/platform/two-factor-policy', 'Set the roles that must use two-factor sign-in (platform_admin; every process enforces it on the next request)', { body: logins.twoFactorPolicyBody }),
  l('post', '/v1/logins/:id/suspend', 'Suspend a login'),
  l('post', '/v1/logins/:id/reactivate', 'Reactivate a login'),
  l('post', '/v1/logins/:id/reset-password', 'Set a temporary password (ends the login’s sessions, revokes its API tokens)', { body: logins.resetBody }),
  l('delete', '/v1/logins/:id/two-factor', "Remove a login's two-factor"),
  l('delete', '/v1/logins/:id', 'Delete a login', done),

  n('get', '/v1/cluster/capacity', 'Declared capacity and what is placed'),
  n('put', '/v1/cluster/capacity', 'Declare capacity', { body: capacity.declareBody }),
  n('delete', '/v1/cluster/capacity', 'Clear declared capacity'),
  n('get', '/v1/cluster/nodes', 'Node records'),
  n('post', '/v1/cluster/nodes', 'Add a node (its token is shown once)', { body: cluster.nodeBody, ...created }),
  n('get', '/v1/cluster/nodes/:name', 'A node record'),
  n('delete', '/v1/cluster/nodes/:name', 'Remove a node', done),
  n('get', '/v1/cluster/nodes/:name/relocation-plan', "Where a node's sites would go"),
  n('get', '/v1/cluster/nodes/:name/metrics', "A node's sampled metrics", { query: alerts.chartQuery }),

  s('post', '/v1/orgs/:id/sites', 'Create a site (placed, then provisioned on its node)', { body: sites.createBody, ...created }),
  s('get', '/v1/orgs/:id/sites', "An account's sites", { query: sites.listQuery }),
  s('get', '/v1/sites/:id', 'A site'),
  s('get', '/v1/sites/:id/usage', "A site's usage from its control group: now and per hour (CPU seconds, memory peak, processes, I/O bytes)"),
  s('patch', '/v1/sites/:id', "Edit a site's aliases, PHP version, cron lines or PHP values (a node operation, checked as creation is)", { body: sites.editBody }),
  s('get', '/v1/sites/:id/placement', "A site's placement"),
  s('get', '/v1/sites/:id/cron/runs', "The last runs of a site's cron lines (as its node last reported them)"),
  s('post', '/v1/sites/:id/suspend', 'Suspend a site'),
  s('post', '/v1/sites/:id/unsuspend', 'Unsuspend a site'),
  s('patch', '/v1/sites/:id/php', "Change a site's PHP settings", { body: sites.phpBody }),
  s('delete', '/v1/sites/:id', 'Delete a site (kept as an archive)', accepted),
  s('get', '/v1/sites/:id/sftp', "A site's SFTP endpoint (host, port, user) and keys (label, type, bits, SHA-256 fingerprint)"),
  s('post', '/v1/sites/:id/sftp/keys', 'Add an SFTP key (OpenSSH public key; RSA under 2048 bits and DSA refused; at most 20)', { body: sftp.sftpKeyBody, ...created }),
  s('delete', '/v1/sites/:id/sftp/keys/:keyId', "Remove an SFTP key (its open sessions end)"),
  s('get', '/v1/sites/:id/files', "List a folder of a site's files", { query: files.pathQuery }),
  s('put', '/v1/sites/:id/files', 'Upload a file (the raw body)', { query: files.pathQuery, body: z.string().meta({ format: 'binary' }), bodyType: 'application/octet-stream', status: [201, 200] }),
  s('delete', '/v1/sites/:id/files', 'Delete a file or folder', { query: files.pathQuery }),
  s('put', '/v1/sites/:id/certificate', 'Attach a TLS certificate and its private key (the key is never returned)', { body: certificates.certificateBody }),
  s('get', '/v1/sites/:id/certificate', "A site's certificate (subject, names, issuer, validity, fingerprint)"),
  s('delete', '/v1/sites/:id/certificate', "Remove a site's certificate"),

  b('post', '/v1/sites/:id/restore-points', 'Take a restore point', accepted),
  b('get', '/v1/sites/:id/restore-points', "A site's restore points", { query: backups.listQuery }),
  b('get', '/v1/restore-points/:id', 'A restore point'),
  b('delete', '/v1/restore-points/:id', 'Delete a restore point', accepted),
  b('post', '/v1/restore-points/:id/restore', 'Restore a restore point', { body: backups.restoreBody, ...accepted }),
  b('put', '/v1/sites/:id/backup-schedule', "Set a site's backup schedule", { body: backups.scheduleBody }),
  b('get', '/v1/sites/:id/backup-schedule', "A site's backup schedule"),
  b('delete', '/v1/sites/:id/backup-schedule', "Remove a site's backup schedule", done),
  b('get', '/v1/site-archives', 'Archives of deleted sites'),
  b('post', '/v1/sites/:id/restore', 'Restore a deleted site from its archive'),
  b('post', '/v1/restore-points/:id/inspection', 'Extract a restore point for inspection', accepted),
  b('get', '/v1/inspections/:id', 'An inspection'),
  b('delete', '/v1/inspections/:id', 'Remove an inspection now', accepted),
  b('get', '/v1/inspections', 'Inspections not yet removed (platform logins)'),
  b('post', '/v1/backups/cleanup', 'Remove backup leftovers'),
  b('get', '/v1/backups/metrics', 'Backup recovery metrics'),

  d('get', '/v1/orgs/:id/dns-zones', "An account's DNS zones"),
  d('post', '/v1/orgs/:id/dns-zones', 'Create a DNS zone', { body: dns.zoneBody, ...created }),
  d('get', '/v1/dns-zones/:id', 'A DNS zone'),
  d('put', '/v1/dns-zones/:id/records', "Replace a zone's records", { body: dns.recordsBody }),
  d('delete', '/v1/dns-zones/:id', 'Delete a DNS zone', done),

  dbs('post', '/v1/orgs/:id/databases', 'Create a database', { body: databases.createBody, ...created }),
  dbs('get', '/v1/orgs/:id/databases', "An account's databases"),
  dbs('get', '/v1/databases/:id', 'A database'),
  dbs('delete', '/v1/databases/:id', 'Delete a database', accepted),
  dbs('post', '/v1/databases/:id/password', "Reset the database user's password (the new one is answered once)", { body: databases.resetBody, ...accepted }),

  al('get', '/v1/alerts', 'Alerts', { query: alerts.listQuery }),
  al('get', '/v1/alerts/:id', 'An alert'),
  al('post', '/v1/alerts/:id/acknowledge', 'Acknowledge an alert', { body: alerts.noteBody, bodyOptional: true }),
  al('post', '/v1/alerts/:id/resolve', 'Resolve an alert', { body: alerts.noteBody, bodyOptional: true }),
  al('get', '/v1/alert-rules', 'Alert rules'),
  al('patch', '/v1/alert-rules/:key', 'Change an alert rule', { body: alerts.ruleChange }),
  al('post', '/v1/alert-rules/:key/restore', 'Restore an alert rule to its default'),

  w('post', '/v1/orgs/:id/webhooks', 'Add a webhook endpoint', { body: webhooks.endpointBody, ...created }),
  w('get', '/v1/orgs/:id/webhooks', "An org's webhook endpoints"),
  w('patch', '/v1/webhooks/:id', 'Change a webhook endpoint', { body: webhooks.endpointChange }),
  w('delete', '/v1/webhooks/:id', 'Remove a webhook endpoint', done),
  w('get', '/v1/webhooks/:id/deliveries', "An endpoint's deliveries", { query: webhooks.limitQuery }),
  w('get', '/v1/webhook-deliveries/:id', 'A delivery'),
  w('post', '/v1/webhook-deliveries/:id/redeliver', 'Deliver again', accepted),

  rc('get', '/v1/reconcile', 'Reconciliation summary'),
  rc('post', '/v1/reconcile/run', 'Run a reconciliation pass now (202 started, 200 already running)', { status: [202, 200] }),
  rc('get', '/v1/reconcile/passes/:id', 'A pass report'),
  rc('get', '/v1/reconcile/sites', 'Sites by reconciliation status', { query: reconcile.listQuery }),
  rc('get', '/v1/reconcile/databases', "The hosting node's databases by reconciliation status"),
  rc('get', '/v1/reconcile/sites/:id', "A site's reconciliation findings"),
  rc('post', '/v1/reconcile/sites/:id/policy', "Set a site's reconciliation policy", { body: reconcile.policyBody }),

  bl('get', '/v1/orgs/:id/billing-plans', "An org's billing plans"),
  bl('post', '/v1/orgs/:id/billing-plans', 'Create a billing plan', { body: billing.planBody, ...created }),
  bl('get', '/v1/billing-plans/:id', 'A billing plan'),
  bl('patch', '/v1/billing-plans/:id', 'Change a billing plan', { body: billing.planPatchBody }),
  bl('delete', '/v1/billing-plans/:id', 'Delete a billing plan', done),
  bl('put', '/v1/orgs/:id/billing-plan', 'Assign a billing plan (null: none)', { body: billing.assignPlanBody }),
  bl('get', '/v1/orgs/:id/billing', "An org's billing page for a month", { query: billing.periodQuery }),
  bl('get', '/v1/orgs/:id/billing/statement', "A month's statement (JSON or CSV)", { query: billing.periodQuery }),
  bl('post', '/v1/orgs/:id/billing/close', 'Close a month (the statement is final after)', { body: billing.closeBody }),
  bl('get', '/v1/orgs/:id/billing/issued', 'Statements issued to the orgs below (API token only; JSON or CSV)', { query: billing.periodQuery }),
  bl('get', '/v1/orgs/:id/billing/statements', 'Closed statements of an org and of the orgs it bills'),

  im('post', '/v1/orgs/:id/imports', 'Upload a legacy account archive (the raw body)', { query: imports.uploadQuery, body: z.string().meta({ format: 'binary' }), bodyType: 'application/octet-stream', ...created }),
  im('get', '/v1/imports/:id', "An import's plan and progress"),
  im('get', '/v1/orgs/:id/imports', "An account's imports, newest first"),
  im('post', '/v1/imports/:id/run', 'Run (or resume) an import', accepted),
];

/** The hosting panel's API (spec 2), at /openapi.json on the panel's port. */
export const panelApi = (): ApiDescription => ({
  title: 'Hosting panel API',
  version: '1',
  description: 'Orgs, logins, sites, DNS, databases, backups, alerts, webhooks, reconciliation, billing and imports under /v1. Every failure answers {"error":{code,message,details}}.',
  securitySchemes: {
    apiToken: { type: 'http', scheme: 'bearer', description: 'An API token (POST /v1/account/tokens)' },
    session: { type: 'apiKey', in: 'cookie', name: 'panel_session', description: 'The console session; changes also need the x-csrf-token header from sign-in' },
  },
  security: ['apiToken', 'session'],
  errorBody: panelErrorBody,
  headers: z.object({ 'x-request-id': header('This request id') }),
  operations,
});
