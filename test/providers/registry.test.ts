import assert from 'node:assert/strict';
import { PROVIDER_KINDS, providerAuthHeaders, providerFor } from '../../providers';

// The provider registry: a kind's endpoints by name, absent where the kind lacks one, nothing for
// unknown kinds (including names on Object.prototype).

describe('provider registry', function () {
  it('lists the registered kinds and answers each kind’s endpoints', () => {
    assert.deepEqual(PROVIDER_KINDS, ['openai', 'anthropic', 'bedrock', 'gemini', 'azure-openai'], 'the kinds a provider row may name');
    for (const e of ['chat', 'embeddings', 'images', 'speech', 'transcription', 'videos'] as const) {
      assert.ok(providerFor('openai', e), `openai offers ${e}`);
    }
    assert.equal(providerFor('anthropic', 'chat')?.native, 'messages', 'anthropic chat speaks messages');
    assert.equal(providerFor('gemini', 'chat')?.native, null, 'no client dialect is Gemini’s: always translated');
    assert.equal(providerFor('azure-openai', 'chat')?.native, 'chat', 'azure-openai chat speaks chat');
    for (const kind of ['anthropic', 'bedrock', 'gemini', 'azure-openai']) {
      for (const e of ['embeddings', 'images', 'speech', 'transcription', 'videos'] as const) {
        assert.equal(providerFor(kind, e), undefined, `${kind} lacks ${e}`);
      }
    }
    assert.equal(providerFor('bedrock', 'chat')?.native, null, 'no client speaks Converse: always translated');
  });

  it('knows no endpoint and no auth for an unknown kind', () => {
    for (const kind of ['bard', 'constructor', 'toString', '__proto__']) {
      assert.equal(providerFor(kind, 'chat'), undefined, `${kind}: no chat`);
      assert.deepEqual(providerAuthHeaders(kind, 'k'), {}, `${kind}: no headers`);
    }
    assert.deepEqual(providerAuthHeaders('openai', 'k'), { authorization: 'Bearer k' }, 'bearer for openai');
    assert.equal(providerAuthHeaders('anthropic', 'k')['x-api-key'], 'k', 'x-api-key for anthropic');
    assert.deepEqual(providerAuthHeaders('gemini', 'k'), { 'x-goog-api-key': 'k' }, 'x-goog-api-key for gemini');
    assert.deepEqual(providerAuthHeaders('azure-openai', 'k'), { 'api-key': 'k' }, 'api-key for azure-openai');
  });
});
