// POST /v1/embeddings (OpenAI's wire format): deterministic vectors, one per input, usage in
// prompt tokens (a token per 4 characters, at least 1). `[sim status=503]` in an input answers
// that error; `[sim cost=X]` adds `usage.cost` (USD) as OpenRouter-style providers do.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerKey, readBody, sendError, sendJson } from './http';
import type { SimState } from './state';

const DEFAULT_DIMENSIONS = 8;

export async function serveEmbeddings(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const read = await readBody(req);
  if (!read.ok) return sendError(res, 413, 'Request body too large.');
  let body: { model?: unknown; input?: unknown; dimensions?: unknown; encoding_format?: unknown };
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    return sendError(res, 400, 'The body is not valid JSON.', { code: 'invalid_json' });
  }
  const model = typeof body.model === 'string' ? body.model : null;
  state.stats.count('/v1/embeddings', bearerKey(req), model);
  if (!model) return sendError(res, 400, "Missing required parameter: 'model'.", { param: 'model', code: 'missing_required_parameter' });
  const inputs = typeof body.input === 'string' ? [body.input] : Array.isArray(body.input) && body.input.every((i) => typeof i === 'string') ? (body.input as string[]) : null;
  if (!inputs || inputs.length === 0) return sendError(res, 400, "'input' must be a string or an array of strings.", { param: 'input', code: 'invalid_value' });
  const joined = inputs.join('\n');
  const status = /\[sim status=(\d{3})\]/.exec(joined)?.[1];
  if (status) return sendError(res, Number(status), `Simulated error ${status}.`, { code: 'simulated' });
  const cost = /\[sim cost=([0-9.]+)\]/.exec(joined)?.[1];
  const dims = typeof body.dimensions === 'number' && Number.isInteger(body.dimensions) && body.dimensions > 0 ? Math.min(body.dimensions, 256) : DEFAULT_DIMENSIONS;
  const tokens = inputs.reduce((n, i) => n + Math.max(1, Math.ceil(i.length / 4)), 0);
  sendJson(res, 200, {
    object: 'list',
    model,
    data: inputs.map((input, index) => {
      const v = vector(input, dims);
      // base64: the little-endian float32 bytes, as OpenAI sends them (its SDK asks for this by default)
      return { object: 'embedding', index, embedding: body.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v };
    }),
    usage: { prompt_tokens: tokens, total_tokens: tokens, ...(cost ? { cost: Number(cost) } : {}) },
  });
}

/** The same input always has the same unit vector. */
function vector(input: string, dims: number): number[] {
  const bytes = createHash('sha512').update(input).digest();
  const v = Array.from({ length: dims }, (_, i) => bytes[i % bytes.length] - 127.5);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}
