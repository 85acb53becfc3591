// Mutable per-server state: behaviour defaults and request statistics for tests.
import { applyUpdate, mergeBehaviour, type Behaviour, type ControlName } from './behaviour';

export interface RequestRecord {
  model: string | null;
  stream: boolean;
  include_usage: boolean;
  key: string | null;
  body: unknown;
}

const KEPT_BODIES = 50;

export class Stats {
  private requests = 0;
  private byModel = new Map<string, number>();
  private byKey = new Map<string, number>();
  private last: RequestRecord[] = [];

  record(entry: RequestRecord): void {
    this.requests += 1;
    if (entry.model !== null) this.byModel.set(entry.model, (this.byModel.get(entry.model) ?? 0) + 1);
    if (entry.key !== null) this.byKey.set(entry.key, (this.byKey.get(entry.key) ?? 0) + 1);
    this.last.push(entry);
    if (this.last.length > KEPT_BODIES) this.last.shift();
  }

  reset(): void {
    this.requests = 0;
    this.byModel.clear();
    this.byKey.clear();
    this.last = [];
  }

  toJSON(): object {
    return {
      requests: this.requests,
      by_model: Object.fromEntries(this.byModel),
      by_key: Object.fromEntries(this.byKey),
      last_requests: this.last,
    };
  }
}

export class BehaviourDefaults {
  private global: Behaviour = {};
  private models = new Map<string, Behaviour>();

  update(model: string | null, set: Behaviour, unset: readonly ControlName[]): void {
    if (model === null) this.global = applyUpdate(this.global, set, unset);
    else this.models.set(model, applyUpdate(this.models.get(model) ?? {}, set, unset));
  }

  reset(): void {
    this.global = {};
    this.models.clear();
  }

  /** Global defaults overlaid with the model's own. */
  forModel(model: string): Behaviour {
    const own = this.models.get(model);
    return own ? mergeBehaviour(this.global, own) : this.global;
  }

  toJSON(): object {
    return { global: this.global, models: Object.fromEntries(this.models) };
  }
}

export interface SimState {
  stats: Stats;
  defaults: BehaviourDefaults;
}
