import { createHash } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import { toNumber } from '../../../../domain/credits/pricing';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import type { Catalog } from '../../../../services/catalog/catalog';
import type { CatalogModel } from '../../../../domain/catalog/model';
import { readJsonObject } from '../../../shared/http';
import { checkAccess } from '../../shared/access';
import { stableJson } from '../../../../services/idempotency/claims';
import { idempotencyKey } from '../../shared/billable-call';
import { ratesFor } from './billing';
import { decodeDataUrl, IMAGE_MEDIA_TYPE, sniffImage } from './image-kind';
import { boundaryOf, MultipartError, readMultipart, type Part } from './multipart';
import { runImageJob, type ImageDeps } from './pipeline';
import { checkForModel, EDIT_TEXT_FIELDS, editFieldsToBody, MAX_INPUT_IMAGES, parseGeneration, type ImageRequest } from './schema';
import { fetchImageUrl, UrlFetchRefused, type FetchPolicy } from './url-fetch';

export interface ImageRouteDeps extends ImageDeps {
  catalog: Catalog;
  /** tests only: the address policy for image URLs */
  urlFetchPolicy?: FetchPolicy;
}

export const EDIT_UPLOAD_LIMIT = 20 * 1024 * 1024;
/** images (16) plus every text field once, with room to spare */
const MAX_FORM_PARTS = MAX_INPUT_IMAGES + EDIT_TEXT_FIELDS.size + 4;
const MAX_FIELD_BYTES = 256 * 1024;
const IMAGE_CAPABILITIES = ['image_generation', 'image_editing', 'streaming'];


/** POST /v1/images, /v1/images/generations (spec 1 section 4.1). */
function generations(deps: ImageRouteDeps, endpoint: string) {
  return async (ctx: Context) => {
    const key = idempotencyKey(ctx);
    const body = await readJsonObject(ctx, 32 * 1024 * 1024);
    const req = parseGeneration(body);
    const editing = req.references.length > 0;
    const access = await checkAccess(deps.catalog, ctx.state.auth, req.model, editing ? 'image_editing' : 'image_generation', endpoint);
    checkForModel(req, access.model, req.references.length, 'input_references');
    const rates = ratesFor(access.model, req);
    // Fetched before anything is held: a refused URL changes nothing.
    const inputs = await Promise.all(req.references.map((r) => inputFromUrl(r.param, r.url, deps.urlFetchPolicy)));
    const bodyHash = createHash('sha256').update(`images\0${stableJson(body)}`).digest('hex');
    await runImageJob(deps, ctx, { req, access, rates, inputs, endpoint, idempotency: key ? { key, bodyHash } : null });
  };
}

async function inputFromUrl(param: string, url: string, policy: FetchPolicy | undefined): Promise<string> {
  if (url.startsWith('data:')) {
    const d = decodeDataUrl(url);
    if (!d || d.data.length === 0) throw new GatewayError('invalid_parameter', { param, detail: 'not a valid base64 data URL' });
    if (!d.kind) throw new GatewayError('invalid_image_type', { param });
    return `data:${IMAGE_MEDIA_TYPE[d.kind]};base64,${d.data.toString('base64')}`;
  }
  try {
    const { data, kind } = await fetchImageUrl(url, policy);
    return `data:${IMAGE_MEDIA_TYPE[kind]};base64,${data.toString('base64')}`;
  } catch (err) {
    if (err instanceof UrlFetchRefused) throw new GatewayError('invalid_parameter', { param, detail: `the image URL was not fetched: ${err.message}` });
    throw err;
  }
}

/** Reads the edit form; a body over the limit is refused while it streams in. */
async function readEditForm(ctx: Context): Promise<Part[]> {
  const type = ctx.get('content-type');
  if (!/^multipart\/form-data\s*(;|$)/i.test(type)) {
    throw new GatewayError('unsupported_media_type', { detail: `Image edits take multipart/form-data, got ${type || 'no content type'}.` });
  }
  const boundary = boundaryOf(type);
  if (!boundary) throw new GatewayError('invalid_multipart', { detail: 'the content type names no boundary' });
  const declared = Number(ctx.get('content-length'));
  try {
    if (declared > EDIT_UPLOAD_LIMIT) throw new MultipartError('too_large', 'declared length over the limit');
    // not destroyed when reading stops early: the rest drains so the client can read the answer
    return await readMultipart(ctx.req.iterator({ destroyOnReturn: false }), boundary, { maxBytes: EDIT_UPLOAD_LIMIT, maxParts: MAX_FORM_PARTS, maxFieldBytes: MAX_FIELD_BYTES });
  } catch (err) {
    if (!(err instanceof MultipartError)) throw new GatewayError('invalid_multipart', { detail: 'the upload broke off' });
    discardRest(ctx);
    if (err.kind === 'too_large') throw new GatewayError('request_too_large', { limit: '20 MB' });
    throw new GatewayError('invalid_multipart', { detail: err.message });
  }
}

/** Lets the rest of a refused upload drain (so the client can read the answer), up to a cap. */
function discardRest(ctx: Context): void {
  const req = ctx.req;
  let discarded = 0;
  req.on('data', (c: Buffer) => {
    discarded += c.length;
    if (discarded > 4 * EDIT_UPLOAD_LIMIT) req.destroy();
  });
  req.resume();
}

/** POST /v1/images/edits (spec 1 section 4.2). */
function edits(deps: ImageRouteDeps) {
  return async (ctx: Context) => {
    const key = idempotencyKey(ctx);
    const parts = await readEditForm(ctx);
    const fields = new Map<string, string>();
    const files: Part[] = [];
    const hash = createHash('sha256').update('images/edits\0');
    for (const p of parts) {
      hash.update(`${p.name}\0${p.filename === null ? 'f' : 'F'}\0`).update(p.data).update('\0');
      if (p.name === 'mask') throw new GatewayError('unsupported_parameter', { param: 'mask', detail: 'masks are not supported.' });
      if (p.name === 'image' || p.name === 'image[]') {
        files.push(p);
        continue;
      }
      if (!EDIT_TEXT_FIELDS.has(p.name)) throw new GatewayError('unsupported_parameter', { param: p.name, detail: 'not a field of image edits.' });
      if (p.filename !== null) throw new GatewayError('invalid_multipart', { detail: `text field '${p.name}' holds a file` });
      if (fields.has(p.name)) throw new GatewayError('invalid_multipart', { detail: `field '${p.name}' is repeated` });
      fields.set(p.name, p.data.toString('utf8'));
    }
    const req: ImageRequest = parseGeneration(editFieldsToBody(fields));
    if (files.length === 0) throw new GatewayError('missing_required_parameter', { param: 'image' });
    if (files.length > MAX_INPUT_IMAGES) throw new GatewayError('invalid_parameter', { param: 'image', detail: `at most ${MAX_INPUT_IMAGES} images` });
    const inputs = files.map((f, i) => {
      const kind = sniffImage(f.data);
      if (!kind) throw new GatewayError('invalid_image_type', { param: files.length > 1 ? `image[${i}]` : 'image' });
      return `data:${IMAGE_MEDIA_TYPE[kind]};base64,${f.data.toString('base64')}`;
    });
    const access = await checkAccess(deps.catalog, ctx.state.auth, req.model, 'image_editing', '/v1/images/edits');
    checkForModel(req, access.model, files.length, 'image');
    const rates = ratesFor(access.model, req);
    await runImageJob(deps, ctx, { req, access, rates, inputs, endpoint: '/v1/images/edits', idempotency: key ? { key, bodyHash: hash.digest('hex') } : null });
  };
}

const numbers = (pricing: unknown): Record<string, number> =>
  Object.fromEntries(Object.entries((pricing ?? {}) as Record<string, unknown>).map(([k, v]) => [k, toNumber(String(v))]));

function modelEntry(m: CatalogModel) {
  const d = m.details ?? {};
  const editing = m.capabilities.includes('image_editing');
  return {
    id: m.id,
    object: 'model',
    capabilities: m.capabilities.filter((c) => IMAGE_CAPABILITIES.includes(c)),
    supported_parameters: d.supported_parameters ?? [],
    max_images: d.max_images ?? 1,
    ...(editing ? { max_input_images: d.max_input_images ?? 0 } : {}),
    ...(d.qualities ? { qualities: d.qualities } : {}),
    ...(d.output_formats ? { output_formats: d.output_formats } : {}),
    pricing: numbers(d.pricing),
  };
}

/** GET /v1/images/models (spec 1 section 2.8): the image models this key may call. */
function imageModels(catalog: Catalog) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const list = (await catalog.allModels()).filter(
      (m) => m.active && m.tiers.includes(auth.tier) && (!auth.allowedModels || auth.allowedModels.includes(m.id)) && (m.capabilities.includes('image_generation') || m.capabilities.includes('image_editing')),
    );
    ctx.body = { object: 'list', data: list.sort((a, b) => a.id.localeCompare(b.id)).map(modelEntry) };
  };
}

/** Mounted under /v1 after authentication. */
export function imageRoutes(deps: ImageRouteDeps): Router {
  const r = new Router();
  r.post('/images', generations(deps, '/v1/images'));
  r.post('/images/generations', generations(deps, '/v1/images/generations'));
  r.post('/images/edits', edits(deps));
  r.get('/images/models', imageModels(deps.catalog));
  return r;
}
