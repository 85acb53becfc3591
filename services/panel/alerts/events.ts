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

/** Records an event of `type` about org `orgId` with its webhook deliveries. Any part of the panel may call it. */
export async function emitEvent(q: Q, orgId: string, type: string, data: Record<string, unknown>): Promise<EmittedEvent> {
  const id = randomUUID();
  await q('panel_events').insert({ id, org_id: orgId, type, data: JSON.stringify(data) });
  const { rowCount } = await q.raw(
    `INSERT INTO panel_webhook_deliveries (id, endpoint_id, event_id)
     SELECT gen_random_uuid(), e.id, ? FROM panel_webhook_endpoints e
     JOIN panel_orgs eo ON eo.id = e.org_id
     JOIN panel_orgs o ON o.id = ? AND o.path LIKE eo.path || '%'
     WHERE e.enabled AND ? = ANY (e.events)`,
    [id, orgId, type],
  );
  return { id, deliveries: rowCount ?? 0 };
}

/** The JSON body a webhook receives for an event: {id, type, time, org, data}. */
export function eventPayload(e: { id: string; type: string; created_at: Date; org_id: string; data: unknown }) {
  return { id: e.id, type: e.type, time: new Date(e.created_at).toISOString(), org: e.org_id, data: e.data };
}
