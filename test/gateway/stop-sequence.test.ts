import assert from 'node:assert/strict';
import { call, newAccount, useStack, type TestAccount } from '../helpers/stack';

// Issue 33 item 7: the messages dialect in front of an OpenAI-kind upstream (sim-gpt), which
// answers a stop-sequence hit with finish_reason "stop" and leaves the sequence out: the answer
// says `stop_reason: stop_sequence` and which sequence matched, as Anthropic does.

const HEADERS = { 'anthropic-version': '2023-06-01' };

describe('messages dialect: a stop sequence hit on an OpenAI-kind upstream (issue 33 item 7)', function () {
  const stack = useStack();
  let acct: TestAccount;
  before(async () => {
    acct = await newAccount({ credits: '10' });
  });
  const body = (extra: Record<string, unknown>) => ({ model: 'sim-gpt', max_tokens: 50, messages: [{ role: 'user', content: 'the quick brown fox jumps over [sim tokens=12]' }], ...extra });

  it('non-streaming: stop_reason stop_sequence and the sequence', async () => {
    const r = await call(stack.gateway.url, '/v1/messages', { key: acct.key, headers: HEADERS, body: body({ stop_sequences: ['fox'] }) });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.stop_reason, 'stop_sequence', `stop_reason: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.stop_sequence, 'fox', 'the sequence that matched');
    assert.ok(!r.json.content[0].text.includes('fox'), `the text stops before the sequence: ${r.json.content[0].text}`);
  });

  it('streaming: the message_delta says stop_sequence and the sequence', async () => {
    const r = await call(stack.gateway.url, '/v1/messages', { key: acct.key, headers: HEADERS, body: body({ stream: true, stop_sequences: ['fox'] }) });
    assert.equal(r.status, 200, r.text);
    const delta = r.text
      .split('\n\n')
      .filter((e) => e.startsWith('event: message_delta'))
      .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)))[0];
    assert.ok(delta, `a message_delta event: ${r.text}`);
    assert.equal(delta.delta.stop_reason, 'stop_sequence', `stop_reason: ${JSON.stringify(delta)}`);
    assert.equal(delta.delta.stop_sequence, 'fox', 'the sequence that matched');
  });

  it('no stop sequence asked: a natural end stays end_turn with stop_sequence null', async () => {
    const r = await call(stack.gateway.url, '/v1/messages', { key: acct.key, headers: HEADERS, body: body({}) });
    assert.equal(r.json.stop_reason, 'end_turn', 'a natural end');
    assert.equal(r.json.stop_sequence, null, 'no sequence');
  });
});
