import { z } from 'zod';
import { GatewayError } from '../../../../domain/shared/errors';
import { unitsCharge, type Credits } from '../../../../domain/credits/pricing';
import type { CatalogModel } from '../../../../domain/catalog/model';

// POST /v1/videos parameters (spec 1 section 4.3). Unknown parameters are refused by name.
const url = z.object({ url: z.string().min(1) }).strict();

const frameImage = z
  .object({ type: z.literal('image_url'), image_url: url, frame_type: z.enum(['first_frame', 'last_frame']) })
  .strict();

const reference = z.union([
  z.object({ type: z.literal('image_url'), image_url: url }).strict(),
  z.object({ type: z.literal('video_url'), video_url: url }).strict(),
  z.object({ type: z.literal('audio_url'), audio_url: url }).strict(),
]);

export const videoCreateSchema = z
  .object({
    model: z.string().min(1),
    prompt: z.string().min(1).max(32_000).optional(),
    duration: z.number().int().positive().optional(),
    resolution: z.string().min(1).optional(),
    aspect_ratio: z.string().regex(/^\d+:\d+$/, 'expected <W>:<H>').optional(),
    size: z.string().regex(/^\d{1,5}x\d{1,5}$/, 'expected <W>x<H>').optional(),
    frame_images: z.array(frameImage).min(1).max(2).optional(),
    input_references: z.array(reference).min(1).max(16).optional(),
    generate_audio: z.boolean().optional(),
    seed: z.number().int().optional(),
    previous_job_id: z.string().min(1).optional(),
    provider: z.object({ options: z.record(z.string(), z.unknown()).optional() }).strict().optional(),
  })
  .strict();

export type VideoCreateRequest = z.infer<typeof videoCreateSchema>;

/** The video attributes and prices of a model (spec 1 section 2.8), from `details`. */
export interface VideoDetails {
  supported_durations: number[];
  default_duration: number;
  supported_resolutions: string[];
  default_resolution?: string;
  supported_aspect_ratios: string[];
  generate_audio: boolean;
  /** credits per second of video, by resolution */
  pricing_skus: Record<string, Credits>;
}

export const videoDetails = (m: CatalogModel): VideoDetails => m.details as unknown as VideoDetails;

export interface VideoPlan {
  duration: number;
  resolution: string;
  /** duration × the resolution's price: what is held, and the estimate of spec 2.1 */
  estimate: Credits;
}

/** The rules of section 4.3 that depend on the model; all checked before anything is held. */
export function planVideo(req: VideoCreateRequest, model: CatalogModel): VideoPlan {
  const d = videoDetails(model);
  if (!req.prompt && !req.frame_images && !req.input_references) throw new GatewayError('missing_required_parameter', { param: 'prompt' });
  const kinds = (req.frame_images ?? []).map((f) => f.frame_type);
  if (new Set(kinds).size !== kinds.length) {
    throw new GatewayError('invalid_parameter', { param: 'frame_images', detail: 'each frame_type (first_frame, last_frame) at most once' });
  }
  const duration = req.duration ?? d.default_duration;
  if (!d.supported_durations.includes(duration)) {
    throw new GatewayError('invalid_parameter', { param: 'duration', detail: `${model.id} supports ${d.supported_durations.join(', ')} seconds` });
  }
  const fromSize = req.size ? `${Math.min(...req.size.split('x').map(Number))}p` : undefined;
  const resolution = req.resolution ?? fromSize ?? d.default_resolution ?? d.supported_resolutions[0];
  if (!d.supported_resolutions.includes(resolution)) {
    const param = req.resolution ? 'resolution' : 'size';
    throw new GatewayError('invalid_parameter', { param, detail: `${model.id} supports ${d.supported_resolutions.join(', ')}` });
  }
  // A resolution the model offers but whose price is not there yet: the tariff is behind.
  if (!d.pricing_skus[resolution]) throw new GatewayError('model_pricing_unavailable', { model: model.id });
  if (req.resolution && fromSize && fromSize !== req.resolution) {
    throw new GatewayError('invalid_parameter', { param: 'size', detail: `${req.size} is not ${req.resolution}` });
  }
  if (req.aspect_ratio && !d.supported_aspect_ratios.includes(req.aspect_ratio)) {
    throw new GatewayError('invalid_parameter', { param: 'aspect_ratio', detail: `${model.id} supports ${d.supported_aspect_ratios.join(', ')}` });
  }
  if (req.generate_audio && !d.generate_audio) {
    throw new GatewayError('unsupported_parameter', { param: 'generate_audio', detail: `${model.id} does not generate audio` });
  }
  return { duration, resolution, estimate: unitsCharge(d.pricing_skus[resolution], duration) };
}
