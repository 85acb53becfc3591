import type { Context } from 'koa';
import type { AuthRecord } from '../../../services/keys/auth-store';
import type { Catalog } from '../../../services/catalog/catalog';
import { readJsonObject } from '../../shared/http';
import { validate } from '../../shared/validate';
import { checkAccess } from '../shared/access';
import { promptTokenEstimate } from './dialects/messages';
import { countTokensSchema } from './messages-schema';

// POST /v1/messages/count_tokens (Anthropic; Claude Code calls it to size its context): the
// prompt's input tokens, estimated as the gateway estimates a prompt elsewhere (about 4
// characters a token, plus the tool definitions). Free: no hold, nothing forwarded.

export function countTokens(catalog: Catalog) {
  return async (ctx: Context) => {
    const body = await readJsonObject(ctx);
    const auth: AuthRecord = ctx.state.auth;
    // The model first: an unknown model is reported as such, whatever else the body holds.
    if (typeof body.model === 'string' && body.model) await checkAccess(catalog, auth, body.model, 'text', '/v1/messages/count_tokens');
    const req = validate(countTokensSchema, body);
    const tools = req.tools ? Math.ceil(JSON.stringify(req.tools).length / 4) : 0;
    ctx.body = { input_tokens: promptTokenEstimate(req) + tools };
  };
}
