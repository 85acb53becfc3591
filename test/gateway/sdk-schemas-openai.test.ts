import assert from 'node:assert/strict';
import path from 'node:path';
import type ts from 'typescript';
import { chatRequestSchema } from '../../api/gateway/text/chat-schema';
import { chatDialect } from '../../api/gateway/text/dialects/chat';
import { responsesDialect } from '../../api/gateway/text/dialects/responses';
import { responsesRequestSchema } from '../../api/gateway/text/responses-schema';
import type { CatalogModel } from '../../domain/catalog/model';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { ROUTING_FIELDS } from '../../api/gateway/text/routing-schema';
import { loadSdkTypes, type SdkTypes } from '../helpers/sdk-types';

// The gateway's OpenAI request schemas against the newest openai SDK's request types (devDependency,
// kept at its newest): every top-level name, and sample values of every field built from the types
// (every union member, literal, input item, content part, tool and tool_choice type), must be accepted
// and translate without a refusal; no top-level name beyond the SDK's (and Codex's) is taken. A new
// vendor field fails here instead of on a user's first prompt.

const RESPONSES = 'resources/responses/responses.d.ts';
const CHAT = 'resources/chat/completions/completions.d.ts';
/** Names taken beyond the SDK's: Codex sends `client_metadata` on /v1/responses (its ResponsesApiRequest). */
// the gateway's own routing fields (api/gateway/text/routing-schema.ts) are in no SDK type
const EXTRA: Record<string, string[]> = { responses: ['client_metadata', ...ROUTING_FIELDS], chat: [...ROUTING_FIELDS] };
/** Ids of state stored at OpenAI: refused as unknown (nothing is stored here), null accepted. */
const STORED_STATE = ['previous_response_id', 'conversation', 'prompt'];

const MODEL = { id: 'sim-gpt', max_output_tokens: 4096, details: {} } as unknown as CatalogModel;

interface Case {
  dialect: 'responses' | 'chat';
  params: () => ts.Type;
  shape: Record<string, unknown>;
  base: Record<string, unknown>;
  /** parses and translates one body; a refusal throws */
  check(body: unknown): void;
}

describe('OpenAI request schemas against the openai SDK types', function () {
  this.timeout(180_000);
  let sdk: SdkTypes;
  before(() => {
    sdk = loadSdkTypes(path.resolve('node_modules/openai'), [RESPONSES, CHAT]);
  });

  const cases: Case[] = [
    {
      dialect: 'responses',
      params: () => sdk.type(RESPONSES, 'ResponseCreateParams'),
      shape: responsesRequestSchema.shape,
      base: { model: 'sim-gpt', input: 'hi' },
      check(body) {
        responsesDialect().toCanonical(responsesRequestSchema.parse(body), MODEL);
      },
    },
    {
      dialect: 'chat',
      params: () => sdk.type(CHAT, 'ChatCompletionCreateParams'),
      shape: chatRequestSchema.shape,
      base: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] },
      check(body) {
        chatDialect.toCanonical(chatRequestSchema.parse(body), MODEL);
      },
    },
  ];

  for (const c of cases) {
    it(`${c.dialect}: the schema takes exactly the SDK's top-level names (streaming and not)`, () => {
      const sdkKeys = sdk.keys(c.params());
      assert.ok(sdkKeys.length > 20, `the SDK type was read (${sdkKeys.length} names)`);
      const ours = Object.keys(c.shape).sort();
      const missing = sdkKeys.filter((k) => !ours.includes(k));
      assert.deepEqual(missing, [], `${c.dialect}: vendor fields the schema refuses as unsupported_parameter: ${missing.join(', ')}`);
      const extra = ours.filter((k) => !sdkKeys.includes(k) && !EXTRA[c.dialect].includes(k));
      assert.deepEqual(extra, [], `${c.dialect}: names the schema takes that no vendor sends: ${extra.join(', ')}`);
    });

    it(`${c.dialect}: sample values of every field (each union member, literal, item, part and tool type) parse and translate`, () => {
      const failures: string[] = [];
      let tried = 0;
      for (const key of sdk.keys(c.params())) {
        for (const v of sdk.prop(c.params(), key).flatMap((t) => sdk.samples(t, 4))) {
          const stored = STORED_STATE.includes(key) && v !== null;
          if (stored) continue; // refused on purpose, checked below
          tried++;
          try {
            c.check({ ...c.base, [key]: v });
          } catch (err) {
            const issues = (err as { issues?: Array<{ path: unknown[]; message: string }> }).issues;
            const why = issues ? issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') : (err as Error).message;
            failures.push(`${key}=${JSON.stringify(v).slice(0, 160)} → ${why}`);
          }
        }
      }
      assert.ok(tried > 200, `${c.dialect}: enough samples were derived from the SDK types (${tried})`);
      assert.deepEqual(failures.slice(0, 25), [], `${c.dialect}: ${failures.length} SDK-valid values refused, first ones listed`);
    });
  }

  it('responses: every input item, content part, tool and tool_choice type of the SDK is one the schema knows', () => {
    const params = sdk.type(RESPONSES, 'ResponseCreateParams');
    const items = sdk.type(RESPONSES, 'ResponseInputItem');
    const tools = sdk.type(RESPONSES, 'Tool');
    const itemTypes = sdk.discriminators(items).filter((t): t is string => t !== null);
    assert.ok(itemTypes.includes('function_call') && itemTypes.includes('custom_tool_call'), `item types read from the SDK: ${itemTypes.join(', ')}`);
    const refused: string[] = [];
    const tryBody = (label: string, body: Record<string, unknown>) => {
      const r = responsesRequestSchema.safeParse({ model: 'sim-gpt', input: 'hi', ...body });
      if (!r.success) refused.push(`${label}: ${r.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`);
    };
    for (const member of (items.isUnion() ? items.types : [items])) tryBody(`input item ${JSON.stringify(sdk.minimal(member))}`, { input: [sdk.minimal(member, 4)] });
    for (const member of (tools.isUnion() ? tools.types : [tools])) tryBody(`tool ${JSON.stringify(sdk.minimal(member))}`, { tools: [sdk.minimal(member, 4)] });
    for (const choice of sdk.prop(params, 'tool_choice').flatMap((t) => sdk.samples(t, 2))) tryBody(`tool_choice ${JSON.stringify(choice)}`, { tool_choice: choice });
    for (const value of sdk.prop(params, 'include').flatMap((t) => sdk.elements(t)).flatMap((t) => sdk.literals(t))) tryBody(`include ${value}`, { include: [value] });
    assert.deepEqual(refused, [], `vendor types the schema refuses: ${refused.length}`);
  });

  it('responses: ids of state stored at OpenAI are refused as unknown, and null is accepted', async () => {
    for (const [key, value] of [['previous_response_id', 'resp_1'], ['conversation', 'conv_1'], ['conversation', { id: 'conv_1' }], ['prompt', { id: 'pmpt_1' }]] as const) {
      const req = responsesRequestSchema.parse({ model: 'sim-gpt', input: 'hi', [key]: value });
      await assert.rejects(async () => responsesDialect().inspect!(req, MODEL), (e: { code?: string; param?: string }) => e.code === 'invalid_parameter' && e.param === key, `${key}=${JSON.stringify(value)} is refused naming it`);
      const none = responsesRequestSchema.parse({ model: 'sim-gpt', input: 'hi', [key]: null });
      await responsesDialect().inspect!(none, MODEL);
    }
  });

  describe('over real HTTP, a request carrying every top-level name of the SDK', () => {
    const stack = useStack();

    /** A body with every SDK top-level name at its minimal value (stored-state ids null, no stream). */
    const everyName = (params: ts.Type, base: Record<string, unknown>) => {
      const body: Record<string, unknown> = {};
      for (const key of sdk.keys(params)) body[key] = STORED_STATE.includes(key) ? null : sdk.minimal(sdk.prop(params, key)[0], 4);
      return { ...body, ...base, stream: false };
    };

    it('responses answers 200 on an OpenAI-kind and an Anthropic-kind model, listing what it ignored', async () => {
      const acct = await newAccount();
      for (const model of ['sim-gpt', 'sim-claude']) {
        const body = everyName(sdk.type(RESPONSES, 'ResponseCreateParams'), { model, input: 'hello [sim tokens=3]', max_output_tokens: 50, client_metadata: { session: 's' } });
        const res = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body });
        assert.equal(res.status, 200, `${model}: ${res.text}`);
        assert.equal(res.json.status, 'completed', `${model}: the response completed`);
        const ignored = res.headers.get('x-gateway-ignored-params') ?? '';
        for (const name of ['client_metadata', 'metadata', 'max_tool_calls', 'top_logprobs', 'store', 'background']) {
          assert.ok(ignored.split(', ').includes(name), `${model}: x-gateway-ignored-params lists ${name}: ${ignored}`);
        }
        const row = await settled(res.headers.get('x-gateway-request-id')!);
        assert.equal(row.status, 'settled', `${model}: one settled charge`);
      }
    });

    it('chat completions answers 200 natively (every field passed to the OpenAI-kind upstream)', async () => {
      const acct = await newAccount();
      const body = everyName(sdk.type(CHAT, 'ChatCompletionCreateParams'), { model: 'sim-gpt', messages: [{ role: 'user', content: 'hello [sim tokens=3]' }], max_tokens: 50, max_completion_tokens: 50 });
      const res = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.object, 'chat.completion', 'a chat completion came back');
      assert.equal(res.headers.get('x-gateway-ignored-params'), null, 'nothing is ignored on the native route');
    });
  });
});
