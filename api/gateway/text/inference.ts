import type { Context } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { convertProviderCost, holdForText, lt, type Tariff, type TokenUsage } from '../../../domain/credits/pricing';
import type { CanonicalRequest, CanonicalResponse, StreamEvent, UpstreamAdapter, UpstreamUsage } from '../../../providers/canonical';
import { providerFor } from '../../../providers';
import { sseEvents } from '../../../providers/sse';
import { postUpstream, type UpstreamResponse } from '../../../providers/upstream';
import type { AuthRecord } from '../../../services/keys/auth-store';
import type { Catalog } from '../../../services/catalog/catalog';
import type { CatalogModel, Provider } from '../../../domain/catalog/model';
import { readJsonObject } from '../../shared/http';
import type { Hold, Reservations } from '../../../services/credits/holds';
import type { Db } from '../../../platform/db';
import { validate } from '../../shared/validate';
import { checkAccess } from '../shared/access';
import { NO_AUDIO, type Billing, type ClientDialect, type RenderContext, type RequestAudio } from './dialects/types';
import { openEventStream } from '../shared/event-stream';
import { watchClient, type ClientWatch } from '../shared/client-watch';
import { beginBillableCall, type Report } from '../shared/billable-call';
import { routeFailure, upstreamFailure, upstreamRefusal } from '../shared/upstream-failure';
import { chargeFor } from '../shared/usage-view';
import { routeKey, routeOrder, type CircuitBreakers } from '../../../domain/catalog/routing';
import { contradiction, planRoutes, type Candidate, type ModelRoutes, type ProviderPreferences } from '../../../domain/catalog/preferences';
import { allRoutesOpen, RouteLog, sendOverRoutes, type Routed, type UpstreamHealth } from './routing';
import { ROUTING_FIELDS } from './routing-schema';
import type { ResponseCache } from '../../../services/cache/responses';
import { answerFromCache, CACHE_HEADER, cachePolicy, keepAnswer, type CacheRequest } from './response-cache';

export interface InferenceDeps {
  db: Db;
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
  /** this process's circuit breakers of the models' routes */
  breakers: CircuitBreakers;
  /** this process's route measures and cooled provider keys */
  health: UpstreamHealth;
  /** what a request may wait in total between retries */
  retryBudgetMs: number;
  responseCache: ResponseCache;
}

/** The routing fields of any dialect's request (api/gateway/text/routing-schema.ts). */
interface RoutingRequest {
  models?: string[];
  provider?: ProviderPreferences;
}

/** A route with the request in its wire format. */
interface Prepared {
  route: Candidate['route'];
  adapter: UpstreamAdapter;
  native: boolean;
  upstreamBody: Record<string, unknown>;
  /** request fields this route's format could not carry, and clamps (x-gateway-ignored-params) */
  ignored: string[];
  /** client headers passed on with a native request */
  headers: Record<string, string>;
}


/**
 * The one path of every text request, whatever its dialect: validate, check access, hold,
 * forward (natively or translated), answer, and report the outcome to the reservation workflow.
 */
export function inference<Req>(deps: InferenceDeps, dialect: ClientDialect<Req>) {
  return async (ctx: Context) => {
    ctx.state.dialect = dialect;
    const started = Date.now();
    // Watched from now on: a client that leaves aborts the provider call, whenever it leaves.
    const client = watchClient(ctx);
    const body = await readJsonObject(ctx);
    const auth: AuthRecord = ctx.state.auth;
    // The model first: an unknown model is reported as such, whatever else the body holds.
    const access = typeof body.model === 'string' && body.model ? await checkAccess(deps.catalog, auth, body.model, 'text', dialect.endpoint) : null;
    const req = validate(dialect.schema, body);
    const { model, complimentary } = access ?? (await checkAccess(deps.catalog, auth, dialect.model(req), 'text', dialect.endpoint));
    const { candidates } = await requestCandidates(deps, auth, dialect.endpoint, { model, complimentary }, req as RoutingRequest);
    const audio = (await dialect.inspect?.(req, model)) ?? NO_AUDIO;
    // Above the model's limit, the output-token limit is clamped to it (coding tools send their own
    // default for models they do not know) and the clamp reported; the hold is sized by the clamped value.
    const limit = model.max_output_tokens;
    const askedRaw = dialect.maxTokens(req);
    const clamped = askedRaw !== null && askedRaw > limit;
    const asked = clamped ? limit : askedRaw;
    const clampNote = clamped ? [`${dialect.name === 'responses' ? 'max_output_tokens' : 'max_tokens'};clamped=${limit}`] : [];
    const nativeBody = withoutRouting(clamped ? dialect.withMaxTokens(body, limit) : body);
    const stream = dialect.stream(req);
    // The response cache answers before any route is chosen (opted in per key or per request).
    const policy = cachePolicy(ctx, auth, dialect.endpoint, body);
    const cached: CacheRequest | null = policy && { started, endpoint: dialect.endpoint, model, complimentary, policy };
    if (cached && (await answerFromCache(deps, ctx, cached))) return;
    const keep = cached ? (text: string, usage: UpstreamUsage | null) => keepAnswer(deps, ctx, cached, text, stream, usage?.tokens ?? null) : null;
    allRoutesOpen(candidates, deps.breakers, model.id);
    // Translated once per model, for every route of another wire format than the client's.
    const canonicals = new Map<string, CanonicalRequest>();
    let canonical: CanonicalRequest | null = null;
    const prepare = ({ route, model: m }: Candidate): Prepared | null => {
      const adapter = providerFor(route.provider.kind, 'chat');
      if (!adapter) return null;
      const nativeRequest = adapter.native === dialect.name ? adapter.nativeRequest : undefined;
      const native = nativeRequest !== undefined;
      if (!native && !canonicals.has(m.id)) canonicals.set(m.id, { ...dialect.toCanonical(req, m), maxTokens: Math.min(asked ?? m.max_output_tokens, m.max_output_tokens) });
      canonical = canonicals.get(m.id) ?? canonical;
      // the adapter's `request` adds what its format cannot carry to a copy of the canonical list
      const translated = native ? null : { ...canonical!, ignored: [...canonical!.ignored] };
      const upstreamBody = nativeRequest ? nativeRequest(nativeBody, route.upstreamModel, stream) : adapter.request(translated!, route.upstreamModel, stream);
      const headers = native ? clientHeaders(ctx, adapter.nativeHeaders) : {};
      return { route, adapter, native, upstreamBody, ignored: [...(translated?.ignored ?? []), ...clampNote], headers };
    };
    // Translate the first route's request before holding: a request the upstream cannot take is refused without a hold.
    const first = prepare(candidates[0]);
    if (!first) throw new GatewayError('provider_unavailable', { model: model.id });
    const prepared = new Map<Candidate, Prepared>([[candidates[0], first]]);
    // (set by prepare, so TypeScript's narrowing of `canonical` does not see it)
    const stopSequences = () => (canonical as CanonicalRequest | null)?.stop ?? [];
    const routeLog = new RouteLog();
    let ignored: string[] = [];
    // set when a fallback model answered: its tariff prices the charge (RequestReport.tariff)
    let fallbackTariff: Tariff | null = null;
    const promptBound = dialect.promptTokenBound(req) + (audio.input?.tokenBound ?? 0);
    const audioUse = { input: audio.input !== null, output: audio.output !== null };
    // The hold covers the dearest model with a candidate route (one that may answer).
    const held = [...new Set(candidates.map((c) => c.model))].map((m) => holdForText(m, promptBound, Math.min(asked ?? m.max_output_tokens, m.max_output_tokens), audioUse)).reduce((a, b) => (lt(a, b) ? b : a));

    const { hold, report } = await beginBillableCall(deps, ctx, {
      started,
      hold: {
        model: model.id,
        provider: first.route.provider.id,
        endpoint: dialect.endpoint,
        tariff: model,
        held: complimentary ? '0' : held,
        complimentary,
        modality: audio.input || audio.output ? 'audio' : 'text',
      },
      // Audio requests show their audio tokens at GET /v1/generation (spec 2.9); every request its route.
      details: (r) => ({ ...audioDetails(audio, r.usage), routing: { ...routeLog.view(), ...(ignored.length ? { ignored_params: ignored } : {}) }, ...(fallbackTariff ? { tariff: fallbackTariff } : {}) }),
    });
    let routed: Routed<Prepared>;
    try {
      routed = await sendOverRoutes(candidates, {
        breakers: deps.breakers,
        health: deps.health,
        log: routeLog,
        retryBudgetMs: deps.retryBudgetMs,
        signal: client.abort.signal,
        prepare: (r) => {
          if (prepared.has(r)) return prepared.get(r)!;
          try {
            return prepare(r);
          } catch (err) {
            if (err instanceof GatewayError) return null; // this route's format cannot carry the request
            throw err;
          }
        },
        refusal: (p) => ({ message: p.adapter.errorMessage }),
        send: (p) => {
          const o = { timeoutMs: deps.upstreamTimeoutMs, signal: client.abort.signal, keyHealth: deps.health.keys, keyRejected: p.adapter.keyRejected, authHeaders: (k: string) => ({ ...p.headers, ...p.adapter.authHeaders(k) }) };
          return p.adapter.send ? p.adapter.send(p.route.provider, p.upstreamBody, o) : postUpstream(p.route.provider, p.adapter.path(p.route.provider, p.route.upstreamModel, stream), p.upstreamBody, o);
        },
      });
    } catch (err) {
      if (client.gone()) return reportLeft(report, null);
      if (client.cut()) throw reportCut(report);
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    if (!routed.ok) throw routeFailure(routed.failure, report, deps.upstreamTimeoutMs, model.id);
    const { adapter, native, route } = routed.route;
    const answering = routed.candidate.model;
    if (answering !== model) fallbackTariff = tariffOf(answering);
    const sentAt = routed.sentAt;
    /** a whole answer's output tokens per second (provider.sort throughput) */
    const measured = (b: Billing) => {
      const s = (Date.now() - sentAt) / 1000;
      if (b.usage?.tokens && s > 0) deps.health.measures.throughput(routeKey(route), b.usage.tokens.completion_tokens / s);
    };
    ignored = routed.route.ignored;
    if (ignored.length) ctx.set('x-gateway-ignored-params', ignored.join(', '));
    const provider = route.provider;
    const upstream = routed.res;
    if (upstream.statusCode !== 200) throw await upstreamRefusal(upstream, report, model.id, { message: adapter.errorMessage });
    ctx.set('x-gateway-request-id', hold.reservationId);
    // The answer names the model that answered (a fallback of `models` too) by its public id.
    const rc: RenderContext = { requestId: hold.reservationId, model: answering.id, created: Math.floor(started / 1000) };
    const publicModel = native ? renameModel(route.upstreamModel, answering.id) : (raw: string) => raw;
    const billingOf = (usage: UpstreamUsage | null): Billing => {
      const cost = usage?.cost ? convertProviderCost(usage.cost, provider.credits_per_cost_unit) : null;
      return { hold, usage, providerCost: cost, charge: chargeFor(hold, usage?.tokens ?? null, cost, fallbackTariff ?? undefined) };
    };

    if (stream) {
      if (cached) ctx.set(CACHE_HEADER, 'miss'); // headers go first: stored only if the stream completes
      return relayStream(ctx, upstream, { keep, dialect, adapter, native, hold, provider, rc, client, report, billingOf, measured, promptEstimate: dialect.promptTokenEstimate(req), audio, publicModel, stop: stopSequences() });
    }
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(publicModel(await upstream.body.text())) as Record<string, unknown>;
    } catch (err) {
      if (client.gone()) return reportLeft(report, null);
      if (client.cut()) throw reportCut(report);
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id, 'generation_failed');
    }
    let canonicalAnswer: CanonicalResponse | null = null;
    const usage = adapter.native === dialect.name ? adapter.usage(json) : (canonicalAnswer = adapter.response(json, stopSequences())).usage;
    const billing = billingOf(usage);
    // The provider did the work but the client left before the answer: what it reports it used.
    if (client.gone()) return reportLeft(report, billing);
    const out = canonicalAnswer ? dialect.render(canonicalAnswer, billing, rc) : dialect.renderNative(json, billing);
    measured(billing);
    reportCompleted(report, billing, out.id);
    ctx.set('x-gateway-cost', billing.charge.charge);
    await keep?.(JSON.stringify(out.body), billing.usage);
    if (cached) ctx.set(CACHE_HEADER, 'miss');
    ctx.body = out.body;
  };
}

/** The tariff fields of a model (a report carries them, not the whole catalog row). */
const tariffOf = (m: CatalogModel): Tariff => ({
  input_multiplier: m.input_multiplier,
  output_multiplier: m.output_multiplier,
  cache_multiplier: m.cache_multiplier,
  cache_creation_multiplier: m.cache_creation_multiplier,
  audio_input_multiplier: m.audio_input_multiplier ?? null,
  audio_output_multiplier: m.audio_output_multiplier ?? null,
});

/** A body passed on as it is, without the gateway's routing fields. */
function withoutRouting(body: Record<string, unknown>): Record<string, unknown> {
  if (!ROUTING_FIELDS.some((f) => f in body)) return body;
  const out = { ...body };
  for (const f of ROUTING_FIELDS) delete out[f];
  return out;
}

/**
 * The request's candidates: the model's routes, then those of its fallback `models` (each checked
 * as the model is), filtered and ordered by its `provider` preferences. Contradictory preferences
 * and unknown provider ids are refused naming the field; preferences that leave no route, with
 * the reason of each route (no_route).
 */
async function requestCandidates(deps: InferenceDeps, auth: AuthRecord, endpoint: string, primary: { model: CatalogModel; complimentary: boolean }, req: RoutingRequest) {
  const { model } = primary;
  const prefs = req.provider ?? {};
  const fallbackIds = [...new Set(req.models ?? [])].filter((id) => id !== model.id);
  const wrong = contradiction(prefs, fallbackIds.length);
  if (wrong) throw new GatewayError('invalid_parameter', { param: wrong.field, detail: wrong.detail });
  for (const f of ['order', 'only', 'ignore'] as const) {
    for (const [i, id] of (prefs[f] ?? []).entries()) {
      if (!(await deps.catalog.provider(id))) throw new GatewayError('invalid_parameter', { param: `provider.${f}[${i}]`, detail: `unknown provider '${id}'` });
    }
  }
  const models: Array<{ model: CatalogModel; complimentary: boolean }> = [];
  for (const id of fallbackIds) {
    try {
      models.push(await checkAccess(deps.catalog, auth, id, 'text', endpoint));
    } catch (err) {
      // the refusal names the fallback's place in `models`
      if (err instanceof GatewayError && err.param === 'model') throw new GatewayError(err.code, { ...err.vars, param: `models[${req.models!.indexOf(id)}]` }, err.headers);
      throw err;
    }
    // One hold is either complimentary or billed: a free model's fallback must be free too, and the reverse.
    const m = models[models.length - 1];
    if (m.complimentary !== primary.complimentary) throw new GatewayError('invalid_parameter', { param: `models[${req.models!.indexOf(id)}]`, detail: `'${id}' is ${m.complimentary ? '' : 'not '}complimentary on this plan, '${model.id}' is ${primary.complimentary ? '' : 'not '}complimentary; a request's models are billed alike` });
  }
  const all: ModelRoutes[] = [];
  for (const m of [model, ...models.map((x) => x.model)]) all.push({ model: m, routes: routeOrder(await deps.catalog.routes(m), Math.random) });
  const plan = planRoutes(all, prefs, (k) => deps.health.measures.get(k));
  if (!plan.ok) throw new GatewayError('no_route', { param: 'provider', detail: plan.reasons.map((r) => `${r.model} via ${r.provider} (${r.upstream_model}): ${r.reason}`).join('; ') });
  return { candidates: plan.candidates };
}

function clientHeaders(ctx: Context, names: string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = ctx.get(n);
    if (v) out[n] = v;
  }
  return out;
}

/** The renamers made so far, by upstream and public id (catalog pairs: few); compiling the pattern per request showed in profiles. */
const renamers = new Map<string, (raw: string) => string>();

/** Replaces `"model": "<upstream>"` (top level or in a nested message) in JSON text. */
function renameModel(upstream: string, publicId: string): (raw: string) => string {
  const key = JSON.stringify([upstream, publicId]);
  let rename = renamers.get(key);
  if (!rename) {
    const field = new RegExp(`("model"\\s*:\\s*)${JSON.stringify(upstream).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'g');
    const replacement = `$1${JSON.stringify(publicId).replace(/\$/g, '$$$$')}`;
    rename = (raw) => raw.replace(field, replacement);
    if (renamers.size >= 1000) renamers.clear(); // bounded even if the catalog churns
    renamers.set(key, rename);
  }
  return rename;
}

function audioDetails(audio: RequestAudio, usage: TokenUsage | null) {
  if (!usage || (!audio.input && !audio.output)) return {};
  return { usageDetails: { input_audio_tokens: usage.audio_input_tokens ?? 0, output_audio_tokens: usage.audio_output_tokens ?? 0 } };
}

/**
 * A client that left before its (non-streaming) answer, or before a stream's first byte: cancelled,
 * charged what the provider reported it used when it answered, else nothing (docs/credits.md).
 */
function reportLeft(report: Report, b: Billing | null): void {
  const error = 'the client closed the connection before the answer';
  if (b?.usage) report({ outcome: 'cancelled', billable: true, usage: b.usage.tokens, providerCost: b.providerCost, httpStatus: 499, error });
  else report({ outcome: 'cancelled', billable: false, usage: null, providerCost: null, httpStatus: 499, error });
}

/**
 * A request the process's drain cut (its grace ran out, SIGTERM): the error is the gateway's, so
 * nothing is billed, whatever was sent; never a client's cancel (docs/credits.md).
 */
function reportCut(report: Report): GatewayError {
  const detail = 'the gateway restarted before the answer was complete; retry the request';
  report({ outcome: 'failed', billable: false, usage: null, providerCost: null, httpStatus: 503, error: detail });
  return new GatewayError('service_unavailable', { detail });
}

/** The workflow recomputes the charge from the same inputs the answer showed. */
function reportCompleted(report: Report, b: Billing, bodyId: string | null) {
  report({ outcome: 'completed', billable: true, usage: b.usage?.tokens ?? null, providerCost: b.providerCost, httpStatus: 200, bodyId });
}

interface RelayContext {
  dialect: Pick<ClientDialect, 'streamWriter'>;
  adapter: UpstreamAdapter;
  native: boolean;
  hold: Hold;
  provider: Provider;
  rc: RenderContext;
  client: ClientWatch;
  report: Report;
  billingOf: (u: UpstreamUsage | null) => Billing;
  /** notes a whole answer's throughput */
  measured: (b: Billing) => void;
  promptEstimate: number;
  audio: RequestAudio;
  /** the translated request's stop sequences (which one matched, for formats that do not say) */
  stop: readonly string[];
  /** renames the upstream model in a passed-through event */
  publicModel: (raw: string) => string;
  /** stores the stream as the client received it, when it completed (response cache); null: not cached */
  keep: ((text: string, usage: UpstreamUsage | null) => Promise<void>) | null;
}

/**
 * Relays the upstream stream as it arrives: natively (events forwarded unchanged) or translated
 * event by event. A client that goes away is settled from what was already sent.
 */
async function relayStream(ctx: Context, upstream: UpstreamResponse, r: RelayContext): Promise<void> {
  const { res, clientGone } = openEventStream(ctx, r.hold.reservationId, r.client);
  // Cached (r.keep): what is sent is kept, and the closing events wait until the whole is stored.
  const sent: string[] = [];
  let closing: string[] | null = null;
  const write = (s: string) => {
    if (r.keep) sent.push(s);
    if (closing) closing.push(s);
    else res.write(s);
  };
  const writer = r.dialect.streamWriter(write, r.rc);
  const parse = r.adapter.streamParser(r.stop);
  let sentChars = 0;
  let sentAudioBytes = 0;
  let finished = false;
  let usage: UpstreamUsage | null = null;
  let bodyId: string | null = null;
  const broken = (error: string) => {
    r.report({ outcome: 'failed', billable: false, uncertain: true, usage: null, providerCost: null, httpStatus: 502, bodyId, error });
    writer.fail(new GatewayError('provider_error', { detail: error }));
    res.end();
  };
  try {
    for await (const ev of sseEvents(upstream.body)) {
      const events: StreamEvent[] = parse(ev);
      for (const e of events) {
        if (e.type === 'text' || e.type === 'reasoning') sentChars += e.text.length;
        else if (e.type === 'tool_args') sentChars += e.fragment.length;
        else if (e.type === 'finish') finished = true;
        else if (e.type === 'usage') usage = e.usage;
        else if (e.type === 'start') bodyId = e.id || null;
        if (e.type === 'audio') {
          sentChars += e.transcript.length;
          sentAudioBytes += e.bytes;
        }
      }
      if (r.native) writer.native(r.publicModel(ev.raw), events);
      else for (const e of events) writer.event(e);
    }
  } catch (err) {
    if (r.client.cut()) {
      writer.fail(reportCut(r.report));
      return void res.end();
    }
    if (!clientGone()) return broken(`the provider stream broke: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (clientGone() && sentChars === 0 && sentAudioBytes === 0) return reportLeft(r.report, null);
  if (clientGone()) {
    // Settled from what was already sent; no usage goes out.
    const audioIn = r.audio.input?.tokenEstimate ?? 0;
    const audioOut = r.audio.output?.tokensOf(sentAudioBytes) ?? 0;
    const tokens: TokenUsage = {
      prompt_tokens: r.promptEstimate + audioIn,
      completion_tokens: Math.ceil(sentChars / 4) + audioOut,
      cached_tokens: 0,
      cache_write_tokens: 0,
      reasoning_tokens: null,
      audio_input_tokens: audioIn,
      audio_output_tokens: audioOut,
    };
    r.report({ outcome: 'cancelled', billable: true, usage: tokens, providerCost: null, httpStatus: 499, bodyId });
    return;
  }
  if (!finished) return broken('the provider stream ended early');
  const billing = r.billingOf(usage);
  r.measured(billing);
  reportCompleted(r.report, billing, bodyId);
  if (r.keep) closing = [];
  writer.end(billing);
  if (r.keep && closing) {
    await r.keep(sent.join(''), usage);
    for (const s of closing) res.write(s);
  }
  res.end();
}
