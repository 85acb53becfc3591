// Late costs of audio requests. The audio answer carries no cost; the simulator records it
// under the id sent in `x-sim-generation-id` and serves it at `GET /v1/generations/{id}`:
// `pending` until the work finished and `cost_delay` passed, then `completed` with the cost.
// State is derived from timestamps; the map is capped, oldest first.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sendError, sendJson } from './http';

export type MediaCost = number | 'auto' | 'none' | undefined;

interface GenerationRecord {
  id: string;
  /** ms when the audio was done (stream ended or closed, answer sent); null while running. */
  finishedAt: number | null;
  costDelay: number;
  /** USD, or null when the provider reports none. */
  cost: number | null;
  usage: Record<string, number>;
}

const CAP = 50_000;
export const DEFAULT_COST_DELAY = 2000;

/** USD rounded to whole nano-dollars, so sums of simulator costs stay exact decimals. */
export function usd(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

export class Generations {
  private records = new Map<string, GenerationRecord>();

  /** A running generation; `finish` it when the audio is done. */
  start(costDelay: number): string {
    const id = `gen_${randomUUID().replace(/-/g, '')}`;
    this.records.set(id, { id, finishedAt: null, costDelay, cost: null, usage: {} });
    if (this.records.size > CAP) {
      const oldest = this.records.keys().next();
      if (!oldest.done) this.records.delete(oldest.value);
    }
    return id;
  }

  finish(id: string, cost: number | null, usage: Record<string, number>): void {
    const record = this.records.get(id);
    if (!record || record.finishedAt !== null) return;
    record.finishedAt = Date.now();
    record.cost = cost;
    record.usage = usage;
  }

  clear(): void {
    this.records.clear();
  }

  /** `GET /v1/generations/{id}`. */
  serve(res: ServerResponse, id: string): void {
    const record = this.records.get(id);
    if (!record) return sendError(res, 404, `No generation found with id '${id}'.`, { code: 'not_found' });
    if (record.finishedAt === null || Date.now() < record.finishedAt + record.costDelay) {
      return sendJson(res, 200, { id, status: 'pending' });
    }
    sendJson(res, 200, { id, status: 'completed', ...(record.cost === null ? {} : { cost: record.cost }), usage: record.usage });
  }
}
