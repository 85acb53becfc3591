import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { pruneAttempts, THROTTLE_DEFAULTS } from '../../../services/panel/logins/throttle';
import { env } from '../../setup/env';

describe('panel: pruning sign-in counts', () => {
  it('deletes counts whose window passed and whose lock ran out, and keeps live windows and locks', async () => {
    const key = (name: string) => `prune-${name}-${randomUUID()}`;
    const rows = {
      stale: { scope: 'ip', key: key('stale'), window_start: env.db.raw("now() - interval '2 hours'"), failures: 3, locked_until: null },
      staleLockOver: { scope: 'login', key: key('over'), window_start: env.db.raw("now() - interval '2 hours'"), failures: 9, locked_until: env.db.raw("now() - interval '1 hour'") },
      live: { scope: 'ip', key: key('live'), window_start: env.db.raw("now() - interval '1 minute'"), failures: 1, locked_until: null },
      locked: { scope: 'login', key: key('locked'), window_start: env.db.raw("now() - interval '2 hours'"), failures: 9, locked_until: env.db.raw("now() + interval '5 minutes'") },
    };
    await env.db('panel_signin_failures').insert(Object.values(rows));
    await pruneAttempts(env.db, THROTTLE_DEFAULTS);
    const left = (await env.db('panel_signin_failures').whereIn('key', Object.values(rows).map((r) => r.key)).pluck('key')).sort();
    assert.deepEqual(left, [rows.live.key, rows.locked.key].sort(), 'only the live window and the still-locked count survive the prune');
    await env.db('panel_signin_failures').whereIn('key', left).delete();
  });
});
