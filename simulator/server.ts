// Provider simulator: a plain node:http server speaking OpenAI's chat-completions and
// Responses formats, Anthropic's Messages format, Gemini's generateContent and Azure OpenAI's deployments, with fault injection and request stats for tests. No framework and no per-request logging,
// so benchmarks measure the gateway rather than the simulator. Media (OpenAI style): images,
// speech, transcription with late costs, and asynchronous video jobs.
import { serveEmbeddings } from './embeddings';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseDefaultsUpdate } from './behaviour';
import { SIMULATOR_MODELS } from './catalog';
import { serveMessages } from './anthropic';
import { serveAzureChat } from './azure';
import { routeBedrock } from './bedrock';
import { serveChat } from './chat';
import { serveGemini } from './gemini';
import { Generations } from './generations';
import { bearerKey, readBody, sendError, sendJson } from './http';
import { serveImageEdits, serveImageGenerations } from './images';
import { MEDIA_PARSERS } from './media-behaviour';
import { serveResponses } from './responses';
import { serveSpeech } from './speech';
import { BehaviourDefaults, Stats, type SimState } from './state';
import { serveTranscriptions } from './transcription';
import { serveSimVideos, serveVideo, serveVideoContent, serveVideoCreate } from './video';
import { VideoJobs } from './video-jobs';

export interface SimulatorOptions {
  port: number;
  host?: string;
}

export interface SimulatorHandle {
  url: string;
  port: number;
  close(): Promise<void>;
}

const MODELS_LIST = {
  object: 'list',
  data: SIMULATOR_MODELS.map((m) => ({ id: m.upstream_model, object: 'model', created: 0, owned_by: 'simulator' })),
};

function methodNotAllowed(res: ServerResponse, allowed: string): void {
  sendError(res, 405, 'Method not allowed.', { headers: { allow: allowed } });
}

async function updateDefaults(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const read = await readBody(req);
  if (!read.ok) return sendError(res, 413, 'Request body too large.', { headers: { connection: 'close' } });
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    return sendError(res, 400, 'Body must be JSON.', { param: 'body' });
  }
  const update = parseDefaultsUpdate(body, MEDIA_PARSERS);
  if (!update.ok) return sendError(res, 400, update.error, { code: 'invalid_sim_control' });
  state.defaults.update(update.model, update.set, update.unset);
  sendJson(res, 200, state.defaults);
}

async function route(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const method = req.method ?? 'GET';

  switch (path) {
    case '/v1/chat/completions':
      return method === 'POST' ? serveChat(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/messages':
      return method === 'POST' ? serveMessages(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/responses':
      return method === 'POST' ? serveResponses(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/models':
      return method === 'GET' ? sendJson(res, 200, MODELS_LIST) : methodNotAllowed(res, 'GET');
    case '/v1/embeddings':
      return method === 'POST' ? serveEmbeddings(req, res, state) : methodNotAllowed(res, 'POST');
    case '/healthz':
      return method === 'GET' ? sendJson(res, 200, { ok: true }) : methodNotAllowed(res, 'GET');
    case '/_sim/behaviour':
      if (method === 'GET') return sendJson(res, 200, state.defaults);
      if (method === 'POST') return updateDefaults(req, res, state);
      if (method === 'DELETE') {
        state.defaults.reset();
        return sendJson(res, 200, state.defaults);
      }
      return methodNotAllowed(res, 'GET, POST, DELETE');
    case '/_sim/stats':
      if (method === 'GET') return sendJson(res, 200, state.stats);
      if (method === 'DELETE') {
        state.stats.reset();
        return sendJson(res, 200, state.stats);
      }
      return methodNotAllowed(res, 'GET, DELETE');
    case '/v1/images/generations':
      return method === 'POST' ? serveImageGenerations(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/images/edits':
      return method === 'POST' ? serveImageEdits(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/audio/speech':
      return method === 'POST' ? serveSpeech(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/audio/transcriptions':
      return method === 'POST' ? serveTranscriptions(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/videos':
      return method === 'POST' ? serveVideoCreate(req, res, state) : methodNotAllowed(res, 'POST');
    case '/_sim/videos':
      return method === 'GET' || method === 'DELETE' ? serveSimVideos(req, res, state, null) : methodNotAllowed(res, 'GET, DELETE');
    default:
      // Amazon Bedrock's Converse routes (the model id is in the path)
      if (await routeBedrock(req, res, state, path)) return;
      if (await routeMedia(req, res, state, path, query === -1 ? '' : url.slice(query + 1))) return;
      return sendError(res, 404, `Unknown path: ${method} ${path}`, { code: 'unknown_url' });
  }
}

const SEGMENT = '([A-Za-z0-9_.:-]{1,200})';
const VIDEO = new RegExp(`^/v1/videos/${SEGMENT}$`);
const VIDEO_CONTENT = new RegExp(`^/v1/videos/${SEGMENT}/content$`);
const GENERATION = new RegExp(`^/v1/generations/${SEGMENT}$`);
const SIM_VIDEO = new RegExp(`^/_sim/videos/${SEGMENT}$`);
const GEMINI = /^\/(?:v1|v1beta)\/models\/([^/:]{1,200}):(generateContent|streamGenerateContent)$/;
const AZURE_CHAT = /^\/openai\/deployments\/([^/]{1,200})\/chat\/completions$/;

/** Paths with an id in them; false when none matches. */
async function routeMedia(req: IncomingMessage, res: ServerResponse, state: SimState, path: string, query: string): Promise<boolean> {
  const method = req.method ?? 'GET';
  const key = bearerKey(req);
  let m: RegExpExecArray | null;
  if ((m = VIDEO_CONTENT.exec(path)) && m[1]) {
    if (method !== 'GET' && method !== 'HEAD') methodNotAllowed(res, 'GET, HEAD');
    else await serveVideoContent(req, res, state, m[1], new URLSearchParams(query), key);
  } else if ((m = VIDEO.exec(path)) && m[1]) {
    if (method !== 'GET' && method !== 'DELETE') methodNotAllowed(res, 'GET, DELETE');
    else await serveVideo(req, res, state, m[1], key);
  } else if ((m = GENERATION.exec(path)) && m[1]) {
    if (method !== 'GET') methodNotAllowed(res, 'GET');
    else {
      state.stats.count('GET /v1/generations/{id}', key);
      state.generations.serve(res, m[1]);
    }
  } else if ((m = SIM_VIDEO.exec(path)) && m[1]) {
    if (method !== 'GET') methodNotAllowed(res, 'GET');
    else serveSimVideos(req, res, state, m[1]);
  } else if ((m = GEMINI.exec(path)) && m[1] && m[2]) {
    // Gemini: the model and the method are in the path ({v1,v1beta}/models/{model}:{method})
    if (method !== 'POST') methodNotAllowed(res, 'POST');
    else await serveGemini(req, res, state, decodeURIComponent(m[1]), m[2] === 'streamGenerateContent', new URLSearchParams(query).get('alt') === 'sse');
  } else if ((m = AZURE_CHAT.exec(path)) && m[1]) {
    // Azure OpenAI: the deployment in the path, the API version in the query
    if (method !== 'POST') methodNotAllowed(res, 'POST');
    else await serveAzureChat(req, res, state, decodeURIComponent(m[1]), new URLSearchParams(query));
  } else {
    return false;
  }
  return true;
}

export async function startSimulator(opts: SimulatorOptions): Promise<SimulatorHandle> {
  const host = opts.host ?? '127.0.0.1';
  const state: SimState = { stats: new Stats(), defaults: new BehaviourDefaults(), videos: new VideoJobs(), generations: new Generations(), statusGiven: new Map() };

  const server = createServer((req, res) => {
    // Whatever a client sends or does, the process must survive it.
    route(req, res, state).catch(() => {
      if (!res.headersSent) sendError(res, 500, 'Simulator internal error.');
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Hanging and keep-alive sockets would otherwise hold close() open forever.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

if (require.main === module) {
  const port = Number(process.env.SIMULATOR_PORT ?? 8199);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`SIMULATOR_PORT must be a port number, got '${process.env.SIMULATOR_PORT}'`);
    process.exit(1);
  }
  startSimulator({ port, host: process.env.SIMULATOR_HOST ?? '127.0.0.1' })
    .then((sim) => {
      console.log(`provider simulator listening on ${sim.url}`);
      const stop = (): void => void sim.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    })
    .catch((err: unknown) => {
      console.error('provider simulator failed to start:', err);
      process.exit(1);
    });
}
