import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

// Events (spec 2 section 6): one row per event, and one webhook delivery per enabled endpoint that
// wants its type on the event's org or any org above it (an endpoint receives the events of its org
// and everything below). Deliveries are recorded in the caller's transaction, so an event and its
// deliveries exist together or not at all; startPendingDeliveries (webhooks.ts) hands them to
// Temporal afterwards.

type Q = Knex | Knex.Transaction;

export interface EmittedEvent {
  id: string;
  deliveries: number;
}

export interface NewEvent {
  orgId: string;
  type: string;
  data: Record<string, unknown>;
}

/** Records an event of `type` about org `orgId` with its webhook deliveries. Any part of the panel may call it. */
export async function emitEvent(q: Q, orgId: string, type: string, data: Record<string, unknown>): Promise<EmittedEvent> {
  const [e] = await emitEvents(q, [{ orgId, type, data }]);
  return e;
}

/** Records many events and their deliveries in two statements (alert evaluation emits them in bulk). */
export async function emitEvents(q: Q, events: NewEvent[]): Promise<EmittedEvent[]> {
  if (!events.length) return [];
  const rows = events.map((e) => ({ id: randomUUID(), org_id: e.orgId, type: e.type, data: JSON.stringify(e.data) }));
  await q('panel_events').insert(rows);
  // endpoints on the event's org or any org above it (their path is a prefix of the event org's)
  const { rows: counts } = await q.raw(
    `WITH ev AS (SELECT * FROM jsonb_to_recordset(?::jsonb) AS x(id uuid, org_id uuid, type text)),
     d AS (
       INSERT INTO panel_webhook_deliveries (id, endpoint_id, event_id)
       SELECT gen_random_uuid(), e.id, ev.id FROM ev
       JOIN panel_orgs o ON o.id = ev.org_id
       JOIN panel_webhook_endpoints e ON e.enabled AND ev.type = ANY (e.events)
       JOIN panel_orgs eo ON eo.id = e.org_id AND o.path LIKE eo.path || '%'
       RETURNING event_id)
     SELECT event_id, count(*)::int AS n FROM d GROUP BY event_id`,
    [JSON.stringify(rows.map(({ id, org_id, type }) => ({ id, org_id, type })))],
  );
  const byEvent = new Map((counts as Array<{ event_id: string; n: number }>).map((c) => [c.event_id, c.n]));
  return rows.map((r) => ({ id: r.id, deliveries: byEvent.get(r.id) ?? 0 }));
}

/** The JSON body a webhook receives for an event: {id, type, time, org, data}. */
export function eventPayload(e: { id: string; type: string; created_at: Date; org_id: string; data: unknown }) {
  return { id: e.id, type: e.type, time: new Date(e.created_at).toISOString(), org: e.org_id, data: e.data };
}
