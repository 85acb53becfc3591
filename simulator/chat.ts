// POST /v1/chat/completions: applies the behaviour controls, then answers in OpenAI's
// wire format, either as one JSON object or as server-sent events.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeBody, parseChatRequest, type ChatRequest, type Plan } from './completion';
import { admit, sendPlain, type Dialect } from './endpoint';
import { bearerKey, sendError, sendJson } from './http';
import { spokenWord } from './media-bytes';
import { dataFrame, writeStream, type Frame } from './sse';
import type { SimState } from './state';

const CHAT: Dialect<ChatRequest> = {
  endpoint: '/v1/chat/completions',
  key: bearerKey,
  describe: describeBody,
  parse: parseChatRequest,
  fail: (res, f) => sendError(res, f.status, f.message, { code: f.code, param: f.param, headers: f.headers }),
};

/** What a vendor speaking the chat format adds to OpenAI's answer (Azure: its content-filter results). */
export interface ChatFlavour {
  /** fields of the answer object (streamed: of a first chunk with no choices) */
  head: object;
  /** fields of each choice (streamed: of the finish chunk's choice) */
  choice: object;
}

const OPENAI: ChatFlavour = { head: {}, choice: {} };

export async function serveChat(req: IncomingMessage, res: ServerResponse, state: SimState, dialect: Dialect<ChatRequest> = CHAT, flavour: ChatFlavour = OPENAI): Promise<void> {
  const admitted = await admit(req, res, state, dialect);
  if (!admitted) return;
  const { request, behaviour, plan } = admitted;
  if (request.stream) {
    const withUsage = request.includeUsage && !behaviour.no_usage;
    await writeStream(res, chatFrames(request, plan, withUsage, flavour), {
      delay: behaviour.chunk_delay ?? 0,
      dropAfter: behaviour.drop_after,
      countedTotal: plan.toolCall ? plan.toolCall.fragments.length : plan.pieces.length,
    });
    return;
  }
  sendPlain(res, behaviour, () =>
    sendJson(res, 200, {
      id: completionId(),
      object: 'chat.completion',
      created: nowSeconds(),
      model: request.model,
      choices: [{ index: 0, message: chatMessage(plan), logprobs: null, finish_reason: plan.finishReason, ...flavour.choice }],
      ...(behaviour.no_usage ? {} : { usage: plan.usage }),
      ...flavour.head,
    }),
  );
}

/** Spoken answers expire from the provider's store after an hour, as OpenAI's do. */
const AUDIO_TTL_SECONDS = 3600;

function chatMessage(plan: Plan): object {
  if (plan.spoken) {
    const format = plan.spoken;
    const data = Buffer.concat(plan.pieces.map((_, i) => spokenWord(format, i, plan.pieces.length))).toString('base64');
    const audio = { id: audioId(), data, transcript: plan.pieces.join(' '), expires_at: nowSeconds() + AUDIO_TTL_SECONDS };
    return { role: 'assistant', content: null, refusal: null, audio };
  }
  if (!plan.toolCall) return { role: 'assistant', content: plan.pieces.join(' ') };
  const { name, arguments: args } = plan.toolCall;
  return { role: 'assistant', content: null, tool_calls: [{ id: toolCallId(), type: 'function', function: { name, arguments: args } }] };
}

function completionId(): string {
  return `chatcmpl-${randomUUID().replace(/-/g, '')}`;
}

function toolCallId(): string {
  return `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
}

function audioId(): string {
  return `audio_${randomUUID().replace(/-/g, '')}`;
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * Role chunk, one chunk per token (text, or tool-argument fragments after a first chunk that
 * names the tool; spoken: a transcript chunk and an audio data chunk per word, then a chunk with
 * `expires_at`), the finish chunk, the usage chunk when asked for, then `[DONE]`.
 */
function* chatFrames(request: ChatRequest, plan: Plan, withUsage: boolean, flavour: ChatFlavour): Generator<Frame> {
  const head = { id: completionId(), object: 'chat.completion.chunk', created: nowSeconds(), model: request.model };
  // OpenAI sends `usage: null` on every chunk but the last when usage was requested.
  const tail = withUsage ? { usage: null } : {};
  const chunk = (delta: object, finishReason: string | null, counted = false): Frame =>
    dataFrame({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason, ...(finishReason ? flavour.choice : {}) }], ...tail }, counted);

  // Azure opens its stream with a chunk of no choices holding the prompt's filter results.
  if (Object.keys(flavour.head).length) yield dataFrame({ id: '', object: '', created: 0, model: '', choices: [], ...flavour.head });

  if (plan.toolCall) {
    const call = { index: 0, id: toolCallId(), type: 'function', function: { name: plan.toolCall.name, arguments: '' } };
    yield chunk({ role: 'assistant', content: null, tool_calls: [call] }, null);
    for (const fragment of plan.toolCall.fragments) {
      yield chunk({ tool_calls: [{ index: 0, function: { arguments: fragment } }] }, null, true);
    }
  } else if (plan.spoken) {
    const format = plan.spoken;
    const id = audioId();
    const words = plan.pieces.length;
    yield chunk({ role: 'assistant', content: null, refusal: null }, null);
    for (let i = 0; i < words; i++) {
      const piece = plan.pieces[i] ?? '';
      yield chunk({ audio: { ...(i === 0 ? { id } : {}), transcript: i === 0 ? piece : ` ${piece}` } }, null);
      yield chunk({ audio: { data: spokenWord(format, i, words).toString('base64') } }, null, true);
    }
    yield chunk({ audio: { id, expires_at: nowSeconds() + AUDIO_TTL_SECONDS } }, null);
  } else {
    yield chunk({ role: 'assistant', content: '' }, null);
    for (let i = 0; i < plan.pieces.length; i++) {
      const piece = plan.pieces[i] ?? '';
      yield chunk({ content: i === 0 ? piece : ` ${piece}` }, null, true);
    }
  }
  yield chunk({}, plan.finishReason);
  if (withUsage) yield dataFrame({ ...head, choices: [], usage: plan.usage });
  yield { text: 'data: [DONE]\n\n', counted: false };
}
