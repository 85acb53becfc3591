import type { Context } from 'koa';
import { z } from 'zod';
import { GatewayError } from '../../../domain/shared/errors';
import { convertProviderCost, holdForText, type TokenUsage } from '../../../domain/credits/pricing';
import { providerAuthHeaders, providerFor } from '../../../providers';
import { postUpstream } from '../../../providers/upstream';
import { readJsonObject } from '../../shared/http';
import { validate } from '../../shared/validate';
import { checkAccess } from '../shared/access';
import { beginBillableCall } from '../shared/billable-call';
import { upstreamFailure, upstreamRefusal } from '../shared/upstream-failure';
import { chargeFor, creditUsage } from '../shared/usage-view';
import type { InferenceDeps } from './inference';

// POST /v1/embeddings (OpenAI's): billed per input token at the model's input rate, with
// billing_source as for chat (the provider's cost when it reports one, else the table price).
// The hold is the input's UTF-8 byte count in tokens: no tokenizer makes more tokens than bytes.

export const embeddingsRequestSchema = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(2048)]),
    dimensions: z.number().int().positive().optional(),
    encoding_format: z.enum(['float', 'base64']).optional(),
    user: z.string().optional(),
  })
  .strict();

export function embeddings(deps: Omit<InferenceDeps, 'breakers' | 'health' | 'retryBudgetMs' | 'responseCache'>) {
  return async (ctx: Context) => {
    const started = Date.now();
    const req = validate(embeddingsRequestSchema, await readJsonObject(ctx));
    const { model, provider, complimentary } = await checkAccess(deps.catalog, ctx.state.auth, req.model, 'embeddings', '/v1/embeddings');
    const endpoint = providerFor(provider.kind, 'embeddings');
    if (!endpoint) throw new GatewayError('provider_unavailable', { model: model.id });
    const inputs = typeof req.input === 'string' ? [req.input] : req.input;
    const bound = inputs.reduce((n, i) => n + Buffer.byteLength(i), 0);
    const { hold, report } = await beginBillableCall(deps, ctx, {
      started,
      hold: { model: model.id, provider: provider.id, endpoint: '/v1/embeddings', tariff: model, held: complimentary ? '0' : holdForText(model, bound, 0), complimentary, modality: 'text' },
    });
    let upstream;
    try {
      upstream = await postUpstream(provider, endpoint.path, { ...req, model: model.upstream_model }, { timeoutMs: deps.upstreamTimeoutMs, authHeaders: (key) => providerAuthHeaders(provider.kind, key) });
    } catch (err) {
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    if (upstream.statusCode !== 200) throw await upstreamRefusal(upstream, report, model.id, { message: endpoint.errorMessage });
    let json: { data?: unknown; usage?: { prompt_tokens?: number; cost?: number | string } };
    try {
      json = (await upstream.body.json()) as typeof json;
    } catch (err) {
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id, 'generation_failed');
    }
    // No usage reported: the estimate a prompt gets elsewhere (about 4 characters a token).
    const promptTokens = json.usage?.prompt_tokens ?? inputs.reduce((n, i) => n + Math.ceil(i.length / 4), 0);
    const usage: TokenUsage = { prompt_tokens: promptTokens, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null };
    const providerCost = json.usage?.cost != null ? convertProviderCost(json.usage.cost, provider.credits_per_cost_unit) : null;
    const charge = chargeFor(hold, usage, providerCost);
    report({ outcome: 'completed', billable: true, usage, providerCost, httpStatus: 200, bodyId: null });
    ctx.set('x-gateway-request-id', hold.reservationId);
    ctx.set('x-gateway-cost', charge.charge);
    ctx.body = { object: 'list', model: model.id, data: json.data, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, ...creditUsage(hold, charge) } };
  };
}
