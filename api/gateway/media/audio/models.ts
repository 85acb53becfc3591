import type { Context } from 'koa';
import { z } from 'zod';
import { validate } from '../../../shared/validate';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import type { Catalog } from '../../../../services/catalog/catalog';
import type { CatalogModel } from '../../../../domain/catalog/model';

const TYPES = { speech: { capability: 'speech_generation', endpoint: '/v1/audio/speech' }, transcription: { capability: 'transcription', endpoint: '/v1/audio/transcriptions' } } as const;
type AudioType = keyof typeof TYPES;

const typeOf = (m: CatalogModel): AudioType | null =>
  m.capabilities.includes('speech_generation') ? 'speech' : m.capabilities.includes('transcription') ? 'transcription' : null;

/** Unit prices are exact decimal strings in the catalog; JSON numbers only here, at the edge. */
const pricing = (details: Record<string, unknown>) =>
  Object.fromEntries(Object.entries((details.pricing as Record<string, unknown> | undefined) ?? {}).map(([unit, rate]) => [unit, Number(rate)]));

export const audioModelsQuery = z.object({ type: z.enum(['speech', 'transcription'], { error: 'speech or transcription' }).optional() }).strict();

/** GET /v1/audio/models?type=speech|transcription (spec 2.8): the audio models this key may call. */
export function audioModels(catalog: Catalog) {
  return async (ctx: Context) => {
    const { type } = validate(audioModelsQuery, ctx.query);
    const auth: AuthRecord = ctx.state.auth;
    const models = (await catalog.allModels())
      .filter((m) => m.active && m.tiers.includes(auth.tier) && (!auth.allowedModels || auth.allowedModels.includes(m.id)))
      .map((m) => ({ m, t: typeOf(m) }))
      .filter((x): x is { m: CatalogModel; t: AudioType } => x.t !== null && (type === undefined || x.t === type))
      .sort((a, b) => a.m.id.localeCompare(b.m.id));
    ctx.body = {
      object: 'list',
      data: models.map(({ m, t }) => {
        const d = m.details;
        const formats = t === 'speech' ? { voices: d.voices ?? [], voice_cloning: d.voice_cloning === true, response_formats: d.response_formats ?? ['mp3', 'pcm'] } : { input_formats: d.input_formats ?? [] };
        return { id: m.id, object: 'model', type: t, endpoint: TYPES[t].endpoint, capabilities: m.capabilities, ...formats, pricing: pricing(d) };
      }),
    };
  };
}
