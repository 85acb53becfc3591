import assert from 'node:assert/strict';
import path from 'node:path';
import ts from 'typescript';
import Anthropic from '@anthropic-ai/sdk';
import { countTokensSchema, messagesRequestSchema } from '../../api/gateway/text/messages-schema';
import { env } from '../setup/env';
import { ROUTING_FIELDS } from '../../api/gateway/text/routing-schema';
import { call, newAccount, useStack, type TestAccount } from '../helpers/stack';

// The gateway's Messages schema against the newest @anthropic-ai/sdk's request TYPES (GA and beta,
// create and count_tokens): every top-level name, every union member anywhere in a field (content
// blocks, tools, thinking, tool choice, message roles, sources…) must be accepted, so a new vendor
// field fails here instead of at a user's first prompt. Values are generated from the .d.ts.

const SDK = path.dirname(require.resolve('@anthropic-ai/sdk')); // the package root (main: index.js)
const FILES = { ga: path.join(SDK, 'resources/messages/messages.d.ts'), beta: path.join(SDK, 'resources/beta/messages/messages.d.ts') };
const program = ts.createProgram(Object.values(FILES), { strict: true, noEmit: true });
const checker = program.getTypeChecker();

function exported(file: string, name: string): ts.Type {
  const sf = program.getSourceFile(file);
  assert.ok(sf, `the SDK file ${file} is readable`);
  const sym = checker.getExportsOfModule(checker.getSymbolAtLocation(sf)!).find((s) => s.name === name);
  assert.ok(sym, `the SDK exports ${name} from ${file}`);
  return checker.getDeclaredTypeOfSymbol(sym);
}

interface Sample {
  value: unknown;
  /** where the variant lies, by SDK type names */
  label: string;
}

/**
 * Values of a type covering each union member at every depth at least once: the first is the
 * base (every property set, with the first member of each union); each further one differs from
 * the base in one place. Linear in the size of the type, not its combinations.
 */
function samples(t: ts.Type, label: string, stack: ts.Type[] = []): Sample[] {
  if (stack.includes(t) || stack.length > 14) return []; // recursive: left out
  const inner = [...stack, t];
  if (t.isStringLiteral() || t.isNumberLiteral()) return [{ value: t.value, label: `${label}=${JSON.stringify(t.value)}` }];
  if (t.flags & ts.TypeFlags.BooleanLiteral) return [{ value: checker.typeToString(t) === 'true', label }];
  if (t.flags & (ts.TypeFlags.String | ts.TypeFlags.Intersection)) return [{ value: 'x', label }]; // `string & {}` too
  if (t.flags & (ts.TypeFlags.Unknown | ts.TypeFlags.Any)) return [{ value: {}, label }]; // a tool's `input`: an object on the wire
  if (t.flags & ts.TypeFlags.Number) return [{ value: 1, label }];
  if (t.flags & ts.TypeFlags.Boolean) return [{ value: true, label }];
  if (t.flags & (ts.TypeFlags.Null | ts.TypeFlags.Undefined)) return [];
  if (t.isUnion()) {
    // `boolean` is the union true | false: one value is enough
    if (t.types.every((m) => m.flags & (ts.TypeFlags.BooleanLiteral | ts.TypeFlags.Null | ts.TypeFlags.Undefined))) return [{ value: true, label }];
    return t.types.flatMap((m) => samples(m, `${label}|${checker.typeToString(m)}`, inner));
  }
  if (checker.isArrayType(t)) {
    return samples(checker.getTypeArguments(t as ts.TypeReference)[0], `${label}[]`, inner).map((s) => ({ value: [s.value], label: s.label }));
  }
  const props = t.getProperties();
  if (props.length === 0) return [{ value: {}, label }]; // {} and index signatures
  const base: Record<string, unknown> = {};
  const variants: Sample[] = [];
  for (const p of props) {
    const ps = samples(checker.getTypeOfSymbol(p), `${label}.${p.name}`, inner);
    if (ps.length === 0) continue;
    base[p.name] = ps[0].value;
    for (const v of ps.slice(1)) variants.push({ value: { [p.name]: v.value }, label: v.label });
  }
  return [{ value: base, label }, ...variants.map((v) => ({ value: { ...base, ...(v.value as object) }, label: v.label }))];
}

/** Top-level properties of a request type, with their samples. */
function fields(file: string, name: string): Map<string, Sample[]> {
  const t = exported(file, name);
  return new Map(t.getProperties().map((p) => [p.name, samples(checker.getTypeOfSymbol(p), `${name}.${p.name}`)]));
}

// The SDK sends `betas` as the anthropic-beta header (checked over HTTP below), not in the body.
const HEADER_PARAMS = new Set(['betas']);
// Names the gateway still takes though the newest SDK no longer lists them (older clients send them).
// older clients' names, and the gateway's own routing fields (api/gateway/text/routing-schema.ts)
const LEGACY = ['temperature', 'top_k', 'top_p', ...ROUTING_FIELDS];
const BASE = { model: 'sim-claude', max_tokens: 50, messages: [{ role: 'user', content: 'hello [sim tokens=2]' }] };

const REQUEST_TYPES = [
  { what: 'MessageCreateParams', file: FILES.ga, type: 'MessageCreateParamsBase', schema: messagesRequestSchema },
  { what: 'beta MessageCreateParams', file: FILES.beta, type: 'MessageCreateParamsBase', schema: messagesRequestSchema },
  { what: 'MessageCountTokensParams', file: FILES.ga, type: 'MessageCountTokensParams', schema: countTokensSchema },
  { what: 'beta MessageCountTokensParams', file: FILES.beta, type: 'MessageCountTokensParams', schema: countTokensSchema },
];

describe('the Messages schema against the newest @anthropic-ai/sdk request types', function () {
  this.timeout(120_000);

  for (const r of REQUEST_TYPES) {
    it(`${r.what}: every top-level name is accepted, and no name outside the SDK's (bar ${LEGACY.join(', ')})`, () => {
      const sdk = fields(r.file, r.type);
      assert.ok(sdk.size >= 10, `${r.what} lists its fields (${sdk.size} read)`);
      const accepted = Object.keys(r.schema.shape);
      const missing = [...sdk.keys()].filter((k) => !HEADER_PARAMS.has(k) && !accepted.includes(k));
      assert.deepEqual(missing, [], `${r.what} names the gateway refuses: ${missing.join(', ')}`);
      const allSdk = new Set(REQUEST_TYPES.filter((x) => x.schema === r.schema).flatMap((x) => [...fields(x.file, x.type).keys()]));
      const extra = accepted.filter((k) => !allSdk.has(k) && !LEGACY.includes(k));
      assert.deepEqual(extra, [], `${r.what}: the gateway accepts names in no SDK type: ${extra.join(', ')}`);
    });

    it(`${r.what}: every union member of every field (blocks, tools, thinking, choices, roles…) is accepted`, () => {
      const refused: string[] = [];
      let tried = 0;
      for (const [name, values] of fields(r.file, r.type)) {
        if (HEADER_PARAMS.has(name)) continue;
        for (const s of values) {
          tried += 1;
          const body: Record<string, unknown> = { ...BASE, [name]: s.value };
          if (r.schema === countTokensSchema) delete body.max_tokens;
          const res = r.schema.safeParse(body);
          if (!res.success) refused.push(`${s.label}: ${res.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`);
        }
      }
      assert.ok(tried > 100, `${r.what}: the variants cover the type (${tried} tried)`);
      assert.deepEqual(refused, [], `${r.what}: ${refused.length} of ${tried} SDK-typed values refused:\n${refused.slice(0, 30).join('\n')}`);
    });
  }

  describe('over HTTP, each top-level name natively (sim-claude) and translated (sim-gpt)', () => {
    const stack = useStack();
    let acct: TestAccount;
    before(async () => {
      acct = await newAccount({ credits: '100' });
    });
    // Translated, a name is either carried (mapped) or named in x-gateway-ignored-params.
    const MAPPED = new Set(['model', 'max_tokens', 'messages', 'system', 'stop_sequences', 'stream', 'thinking', 'output_config', 'output_format', 'tool_choice', 'tools', 'metadata']);

    it('every name of the beta MessageCreateParams answers 200 on both upstreams; unmapped ones are reported', async () => {
      const sdk = fields(FILES.beta, 'MessageCreateParamsBase');
      const failures: string[] = [];
      for (const [name, values] of sdk) {
        if (HEADER_PARAMS.has(name) || name === 'model' || name === 'messages') continue;
        const value = name === 'max_tokens' ? 40 : name === 'tool_choice' ? { type: 'auto' } : values[0].value;
        for (const model of ['sim-claude', 'sim-gpt']) {
          const res = await call(stack.gateway.url, '/v1/messages', { key: acct.key, headers: { 'anthropic-version': '2023-06-01' }, body: { ...BASE, model, [name]: value } });
          if (res.status !== 200) failures.push(`${name} on ${model}: ${res.status} ${res.text.slice(0, 300)}`);
          else if (model === 'sim-gpt' && !MAPPED.has(name) && !(res.headers.get('x-gateway-ignored-params') ?? '').split(', ').some((n) => n === name || n.startsWith(`${name}.`))) {
            failures.push(`${name} on sim-gpt: neither mapped nor in x-gateway-ignored-params (${res.headers.get('x-gateway-ignored-params')})`);
          }
        }
      }
      assert.deepEqual(failures, [], `refused or silently dropped:\n${failures.join('\n')}`);
    });

    it('`betas` goes as the anthropic-beta header (the SDK moves it there) and reaches a native upstream', async () => {
      const client = new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 });
      const m = await client.beta.messages.create({ ...BASE, messages: [{ role: 'user', content: 'beta header [sim tokens=2]' }], betas: ['context-management-2025-06-27'], context_management: { edits: [{ type: 'clear_thinking_20251015' }] } } as Anthropic.Beta.MessageCreateParamsNonStreaming);
      assert.equal(m.type, 'message', 'a beta request through the SDK is answered');
      const stats = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ body: { messages?: Array<{ content: unknown }> }; anthropic_beta?: string }> };
      const seen = stats.last_requests.reverse().find((q) => JSON.stringify(q.body?.messages ?? '').includes('beta header'));
      assert.ok(seen, 'the simulator received the request');
      assert.equal(seen.anthropic_beta, 'context-management-2025-06-27', 'the anthropic-beta header went on to the upstream');
    });
  });
});
