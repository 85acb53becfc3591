import type { Context } from 'koa';
import type { AuthRecord } from '../../../services/keys/auth-store';
import type { Catalog } from '../../../services/catalog/catalog';
import { readJsonObject } from '../../shared/http';
import { validate } from '../../shared/validate';
import { checkAccess } from '../shared/access';
import { messagesDialect, messagesRequestSchema, type MessagesRequest } from './dialects/messages';

// POST /v1/messages/count_tokens (Anthropic; Claude Code calls it to size its context): the
// prompt's input tokens, estimated as the gateway estimates a prompt elsewhere (about 4
// characters a token, plus the tool definitions). Free: no hold, nothing forwarded.

export const countTokensSchema = messagesRequestSchema.pick({ model: true, messages: true, system: true, tools: true, tool_choice: true, thinking: true }).strict();

export function countTokens(catalog: Catalog) {
  return async (ctx: Context) => {
    const req = validate(countTokensSchema, await readJsonObject(ctx));
    const auth: AuthRecord = ctx.state.auth;
    await checkAccess(catalog, auth, req.model, 'text', '/v1/messages/count_tokens');
    const tools = req.tools ? Math.ceil(JSON.stringify(req.tools).length / 4) : 0;
    ctx.body = { input_tokens: messagesDialect.promptTokenEstimate({ ...req, max_tokens: 1 } as MessagesRequest) + tools };
  };
}
