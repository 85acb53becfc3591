import Router from '@koa/router';
import type { AudioDeps } from './common';
import { audioModels } from './models';
import { speech } from './speech';
import { transcription } from './transcription';

/** The audio endpoints of spec 1 (4.4, 4.5, 2.8), mounted under /v1 after authentication. */
export function audioRoutes(deps: AudioDeps): Router {
  const r = new Router({ prefix: '/audio' });
  r.post('/speech', speech(deps));
  r.post('/transcriptions', transcription(deps));
  r.get('/models', audioModels(deps.catalog));
  return r;
}
