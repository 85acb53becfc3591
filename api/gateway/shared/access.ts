import { GatewayError } from '../../../domain/shared/errors';
import type { AuthRecord } from '../../../services/keys/auth-store';
import { isExpired } from './auth';
import type { Catalog } from '../../../services/catalog/catalog';
import type { CatalogModel, Provider } from '../../../domain/catalog/model';

// Capability → the endpoint that serves it (spec 1 section 2.8).
export const CAPABILITY_ENDPOINT: Record<string, string> = {
  text: '/v1/chat/completions, /v1/messages or /v1/responses',
  image_generation: 'POST /v1/images',
  image_editing: 'POST /v1/images/edits',
  video_generation: 'POST /v1/videos',
  speech_generation: 'POST /v1/audio/speech',
  transcription: 'POST /v1/audio/transcriptions',
  embeddings: 'POST /v1/embeddings',
};

export interface Access {
  model: CatalogModel;
  provider: Provider;
  complimentary: boolean;
}

/**
 * The checks every inference endpoint makes before holding credits: the key's allowed models
 * (keyed variant), plan, model, capability, tier. Throws the error of spec 1 section 7 (spec 3 A
 * section 7 for the key's list); nothing is deducted.
 */
export async function checkAccess(catalog: Catalog, auth: AuthRecord, modelId: string, capability: string, endpoint: string): Promise<Access> {
  auth.noteModel?.(modelId);
  if (auth.allowedModels && !auth.allowedModels.includes(modelId)) throw new GatewayError('model_not_allowed', { model: modelId, param: 'model' });
  if (isExpired(auth)) throw new GatewayError('plan_expired', { expires_at: auth.planExpiresAt!.toISOString() });
  const model = await catalog.model(modelId);
  if (!model || !model.active) throw new GatewayError('model_not_found', { model: modelId, param: 'model' });
  if (!model.capabilities.includes(capability)) {
    const served = model.capabilities.map((c) => CAPABILITY_ENDPOINT[c]).filter(Boolean);
    throw new GatewayError('unsupported_capability', {
      model: modelId,
      endpoint,
      param: 'model',
      detail: served.length ? `use ${served.join(' or ')}.` : 'it serves no public endpoint.',
    });
  }
  if (!model.tiers.includes(auth.tier)) throw new GatewayError('model_not_permitted', { model: modelId, tier: auth.tier, param: 'model' });
  const provider = await catalog.provider(model.provider_id);
  if (!provider) throw new GatewayError('provider_unavailable', { model: modelId });
  return { model, provider, complimentary: auth.tier === 'free_trial' && model.free_trial };
}
