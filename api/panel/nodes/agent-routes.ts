import Router from '@koa/router';
import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { z } from 'zod';
import { PanelError } from '../../../domain/panel/errors';
import { isNodeName, NODE_API_PREFIX, type Heartbeat, type NodeOperation, type OperationResult } from '../../../domain/panel/node-ops';
import type { Client } from '@temporalio/client';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import { signalOperationReported } from '../../../services/panel/nodes/client';
import { enrolNode, nodeByToken, recordHeartbeat, touchPull, type NodeRow } from '../../../services/panel/nodes/nodes';
import { claimOperations, recordResult, type OperationWakeups } from '../../../services/panel/nodes/queue';
import { recordCronRuns } from '../../../services/panel/sites/cron-runs';
import { parse } from '../shared/http';

// The node API that agents (`panel-host serve`) call (domain/panel/node-ops.ts, PANEL.md section 1):
// enrol, long-poll operations, report results, heartbeat. Every call carries the node's token.

export interface AgentRouteOptions {
  db: Db;
  /** signals the workflow waiting for an operation once its result is recorded */
  temporal: Client;
  logger: Logger;
  wakeups: OperationWakeups;
  /** how often agents should send heartbeats (told at enrolment) */
  heartbeatSeconds: number;
  /** how often a waiting long poll re-reads the queue anyway (ms); while the LISTEN connection is down, 1 s */
  pollFallbackMs: number;
  /** an operation handed out and not reported within this lease is handed out again (ms) */
  operationLeaseMs: number;
}

/** The longest a long poll waits (s). */
export const MAX_WAIT_SECONDS = 30;
/** Operations handed out by one pull at most. */
const PULL_LIMIT = 50;

const count = z.number().finite().min(0);
// Facts an agent newer than this panel reports are kept as they come (looseObject).
const facts = z.looseObject({
  webServer: z.enum(['nginx', 'builtin']),
  phpVersions: z.array(z.string().regex(/^\d+\.\d+$/, 'must be a PHP version such as 8.2')).max(32),
  mariadb: z.boolean(),
  roles: z.array(z.enum(['web', 'db'])).max(8),
  webAddress: z.string().min(1).max(300),
  backups: z.boolean().optional(),
});
const metrics = z.object({
  bootId: z.string().min(1).max(100),
  uptimeSeconds: count,
  cpuPercent: z.number().min(0).max(100),
  load: z.tuple([count, count, count]),
  memory: z.object({ totalMb: count, availableMb: count }),
  rootFs: z.object({ totalMb: count, freeMb: count }),
  network: z.object({ rxBytes: count, txBytes: count }),
  sampledAt: z.iso.datetime({ offset: true }),
});
const usage = z.array(z.object({ siteId: z.string().min(1).max(64), diskMb: count, inodes: z.number().int().min(0) })).max(100_000);
const startedAt = z.iso.datetime({ offset: true });

const enrolBody = z.object({ node: z.string().refine(isNodeName, 'must be a node name'), facts, agentStartedAt: startedAt });
const cronRuns = z
  .array(
    z.object({
      id: z.string().min(1).max(64),
      siteId: z.string().min(1).max(64),
      line: z.string().max(1000),
      startedAt: z.iso.datetime({ offset: true }),
      finishedAt: z.iso.datetime({ offset: true }).nullable(),
      status: z.enum(['running', 'ok', 'failed', 'timeout', 'skipped']),
      exitCode: z.number().int().nullable(),
      output: z.string().max(64 * 1024),
      user: z.string().max(64),
    }),
  )
  .max(5000);
const heartbeatBody = z.object({ facts, metrics, usage, agentStartedAt: startedAt, reconnects: z.number().int().min(0).max(2 ** 31 - 1), cronRuns: cronRuns.optional() });
const resultBody = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), detail: z.record(z.string(), z.unknown()).optional() }),
  z.object({ ok: z.literal(false), error: z.string().max(10_000), refused: z.boolean() }),
]);
const pollQuery = z.object({ wait: z.coerce.number().finite().min(0).default(0) });

/** A JSON object body of up to 8 MB (a heartbeat lists every site's usage). */
async function agentBody<S extends z.ZodType>(ctx: Context, schema: S): Promise<z.infer<S>> {
  if (ctx.request.type !== 'application/json') throw new PanelError('unsupported_media_type');
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit: 8 * 1024 * 1024, encoding: 'utf8', length: ctx.get('content-length') || undefined });
  } catch {
    throw new PanelError('validation_failed', { field: 'body', detail: 'body: could not be read (at most 8 MB)' });
  }
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new PanelError('validation_failed', { field: 'body', detail: 'body: not valid JSON' });
  }
  return parse(schema, body);
}

const nodeOf = (ctx: Context): NodeRow => ctx.state.node as NodeRow;

/** `Authorization: Bearer <node token>` of an agent node, else 401. */
function nodeAuth(db: Db) {
  return async (ctx: Context, next: Next) => {
    const token = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'))?.[1];
    const node = token ? await nodeByToken(db, token) : null;
    if (!node) throw new PanelError('unauthenticated', { detail: 'send Authorization: Bearer <node token>' });
    ctx.state.node = node;
    await next();
  };
}

export function agentRoutes(o: AgentRouteOptions): Router {
  const r = new Router({ prefix: NODE_API_PREFIX });
  r.use(nodeAuth(o.db));

  r.post('/enrol', async (ctx) => {
    const b = await agentBody(ctx, enrolBody);
    const node = nodeOf(ctx);
    if (b.node !== node.name) throw new PanelError('forbidden', { detail: `this token belongs to node "${node.name}", not "${b.node}"` });
    await enrolNode(o.db, node.name, { facts: b.facts, agentStartedAt: b.agentStartedAt });
    ctx.body = { node: node.name, heartbeatSeconds: o.heartbeatSeconds };
  });

  r.post('/heartbeat', async (ctx) => {
    const b = await agentBody(ctx, heartbeatBody);
    await recordHeartbeat(o.db, nodeOf(ctx).name, b as Heartbeat);
    await recordCronRuns(o.db, nodeOf(ctx).name, b.cronRuns ?? []);
    ctx.status = 204;
  });

  // Long poll: answers at once when operations are queued, else waits (at most `wait`, ≤ 30 s) until
  // a NOTIFY for this node's queue (or the fallback poll) finds some, or the time runs out.
  r.get('/operations', async (ctx) => {
    const waitMs = Math.min(parse(pollQuery, ctx.query).wait, MAX_WAIT_SECONDS) * 1000;
    const name = nodeOf(ctx).name;
    const deadline = Date.now() + waitMs;
    let gone = false;
    let sub: Awaited<ReturnType<OperationWakeups['subscribe']>> | null = null;
    const onClose = () => {
      gone = !ctx.res.writableEnded;
      sub?.wake();
    };
    ctx.res.once('close', onClose);
    let operations: NodeOperation[];
    try {
      await touchPull(o.db, name);
      operations = await claimOperations(o.db, name, PULL_LIMIT, o.operationLeaseMs);
      if (!operations.length && waitMs > 0) {
        // LISTEN before reading the queue again, so an operation queued in between is not missed.
        sub = await o.wakeups.subscribe(name);
        for (;;) {
          // The agent went away: hand it nothing (what it would miss stays queued).
          if (gone) break;
          operations = await claimOperations(o.db, name, PULL_LIMIT, o.operationLeaseMs);
          const left = deadline - Date.now();
          if (operations.length || left <= 0) break;
          await sub.next(Math.min(left, o.wakeups.healthy ? o.pollFallbackMs : 1000));
        }
        await touchPull(o.db, name);
      }
    } finally {
      sub?.close();
      ctx.res.off('close', onClose);
    }
    ctx.body = { operations };
  });

  r.post('/operations/:id/result', async (ctx) => {
    const b = await agentBody(ctx, resultBody);
    const r = await recordResult(o.db, nodeOf(ctx).name, ctx.params.id, b as OperationResult);
    ctx.status = 204;
    // The recorded result is durable; the signal only ends the workflow's wait early (it polls too).
    if (r.recorded) void signalOperationReported(o.temporal, ctx.params.id, r.kind ?? '').catch((err) => o.logger.warn({ err, op_id: ctx.params.id }, 'signalling the operation workflow failed; it reads the result at its next poll'));
  });

  return r;
}
