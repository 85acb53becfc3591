// Mutable per-server state: behaviour defaults and request statistics for tests.
import { applyUpdate, mergeBehaviour, type Behaviour } from './behaviour';
import type { Generations } from './generations';
import { completionView, type MediaBehaviour, type MediaControlName } from './media-behaviour';
import type { VideoJobs } from './video-jobs';

export interface RequestRecord {
  /** Path of the endpoint that was called, e.g. `/v1/messages`. */
  endpoint: string;
  model: string | null;
  stream: boolean;
  include_usage: boolean;
  key: string | null;
  body: unknown;
  /** the `anthropic-beta` header of an Anthropic request, when sent */
  anthropic_beta?: string;
}

const KEPT_BODIES = 50;

export class Stats {
  private requests = 0;
  private byModel = new Map<string, number>();
  private byKey = new Map<string, number>();
  private byEndpoint = new Map<string, number>();
  private last: RequestRecord[] = [];
  /** calls whose client closed the connection during their latency (an aborted upstream call) */
  private closedEarly = new Map<string, number>();

  record(entry: RequestRecord): void {
    this.requests += 1;
    if (entry.model !== null) this.byModel.set(entry.model, (this.byModel.get(entry.model) ?? 0) + 1);
    if (entry.key !== null) this.byKey.set(entry.key, (this.byKey.get(entry.key) ?? 0) + 1);
    this.byEndpoint.set(entry.endpoint, (this.byEndpoint.get(entry.endpoint) ?? 0) + 1);
    this.last.push(entry);
    if (this.last.length > KEPT_BODIES) this.last.shift();
  }

  /** Counts a call without keeping its body (polls, downloads: they would push the bodies out). */
  count(endpoint: string, key: string | null, model: string | null = null): void {
    this.requests += 1;
    if (model !== null) this.byModel.set(model, (this.byModel.get(model) ?? 0) + 1);
    if (key !== null) this.byKey.set(key, (this.byKey.get(key) ?? 0) + 1);
    this.byEndpoint.set(endpoint, (this.byEndpoint.get(endpoint) ?? 0) + 1);
  }

  /** A call whose client closed the connection before it was answered. */
  closed(endpoint: string): void {
    this.closedEarly.set(endpoint, (this.closedEarly.get(endpoint) ?? 0) + 1);
  }

  reset(): void {
    this.closedEarly.clear();
    this.requests = 0;
    this.byModel.clear();
    this.byKey.clear();
    this.byEndpoint.clear();
    this.last = [];
  }

  toJSON(): object {
    return {
      requests: this.requests,
      by_model: Object.fromEntries(this.byModel),
      by_key: Object.fromEntries(this.byKey),
      by_endpoint: Object.fromEntries(this.byEndpoint),
      closed_early: Object.fromEntries(this.closedEarly),
      last_requests: this.last,
    };
  }
}

/**
 * Defaults hold media controls too (they are a superset); the completion endpoints get a view
 * holding only their own controls, kept up to date on every update.
 */
export class BehaviourDefaults {
  private global: MediaBehaviour = {};
  private models = new Map<string, MediaBehaviour>();
  private textGlobal: Behaviour = {};
  private textModels = new Map<string, Behaviour>();

  update(model: string | null, set: MediaBehaviour, unset: readonly MediaControlName[]): void {
    if (model === null) {
      this.global = applyUpdate(this.global, set, unset);
      this.textGlobal = completionView(this.global);
    } else {
      const next = applyUpdate(this.models.get(model) ?? {}, set, unset);
      this.models.set(model, next);
      this.textModels.set(model, completionView(next));
    }
  }

  reset(): void {
    this.global = {};
    this.models.clear();
    this.textGlobal = {};
    this.textModels.clear();
  }

  /** Global defaults overlaid with the model's own (completion controls only). */
  forModel(model: string): Behaviour {
    const own = this.textModels.get(model);
    return own ? mergeBehaviour(this.textGlobal, own) : this.textGlobal;
  }

  /** Global defaults overlaid with the model's own, media controls included. */
  mediaForModel(model: string | null): MediaBehaviour {
    const own = model === null ? undefined : this.models.get(model);
    return own ? mergeBehaviour(this.global, own) : this.global;
  }

  toJSON(): object {
    return { global: this.global, models: Object.fromEntries(this.models) };
  }
}

export interface SimState {
  stats: Stats;
  defaults: BehaviourDefaults;
  /** Asynchronous video jobs (`/v1/videos`). */
  videos: VideoJobs;
  /** Late costs of audio requests (`/v1/generations/{id}`). */
  generations: Generations;
  /** `status` answers given per model, for `status_times` */
  statusGiven: Map<string, number>;
}
