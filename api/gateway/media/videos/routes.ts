import type Router from '@koa/router';
import { createVideo } from './create';
import type { VideoDeps } from './deps';
import { getVideo, videoContent, videoModels } from './read';

/** Video jobs (spec 1 sections 2.7, 3.1, 4.3) on the authenticated /v1 router. */
export function videoRoutes(v1: Router, deps: VideoDeps): void {
  v1.get('/videos/models', videoModels(deps)); // before /videos/:id
  v1.post('/videos', createVideo(deps));
  v1.get('/videos/:id', getVideo(deps));
  v1.get('/videos/:id/content', videoContent(deps));
}
