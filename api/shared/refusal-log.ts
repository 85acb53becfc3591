import type { Context } from 'koa';
import { LRUCache } from 'lru-cache';
import type { GatewayError } from '../../domain/shared/errors';
import type { Logger } from '../../platform/logger';

// Operators see refusals: one `info` line per 4xx answer (request id, method, path, status, error
// code and param, and who: key id, CI project id or client address; never a key, token or body).
// A client gets at most `linesPerWindow` lines per window; what is left out is counted and
// reported in one `suppressed` line when its window ends, so a misbehaving client cannot flood the log.

export interface RefusalLogSettings {
  /** lines per client per window (REFUSAL_LOG_LINES_PER_MINUTE) */
  linesPerWindow: number;
  windowMs: number;
  /** clients tracked at once; the least recent beyond it ends its window early */
  maxClients: number;
}

export const REFUSAL_LOG_DEFAULTS: RefusalLogSettings = { linesPerWindow: 10, windowMs: 60_000, maxClients: 10_000 };

type Who = { key_id: string } | { project_id: string } | { client_ip: string };

interface Window {
  who: Who;
  logged: number;
  suppressed: number;
}

/** Who sent the request: the authenticated key, else the test-run API's CI project, else the client address. */
function whoOf(ctx: Context): Who {
  const keyId: string | undefined = ctx.state.auth?.keyId ?? ctx.state.logged?.keyId ?? undefined;
  if (keyId) return { key_id: keyId };
  const projectId: string | undefined = ctx.state.ciProject?.id;
  if (projectId) return { project_id: projectId };
  // The request log's address believes X-Forwarded-For from TRUSTED_PROXIES only; without it, the socket's.
  return { client_ip: ctx.state.logged?.ip ?? ctx.request.socket.remoteAddress ?? 'unknown' };
}

export class RefusalLog {
  private readonly windows: LRUCache<string, Window>;

  constructor(
    private readonly logger: Logger,
    private readonly settings: RefusalLogSettings = REFUSAL_LOG_DEFAULTS,
  ) {
    // A window opens with a client's first refusal and ends windowMs later (autopurge timers are unref'd).
    this.windows = new LRUCache<string, Window>({
      max: settings.maxClients,
      ttl: settings.windowMs,
      ttlAutopurge: true,
      dispose: (w) => {
        if (w.suppressed > 0) this.logger.info({ ...w.who, suppressed: w.suppressed, window_ms: this.settings.windowMs }, `refusals: suppressed ${w.suppressed} lines`);
      },
    });
  }

  /** Logs the refusal the answer carries (ctx.status 4xx), within the client's budget. */
  note(ctx: Context, error: GatewayError | undefined): void {
    const who = whoOf(ctx);
    const id = Object.entries(who)[0].join(':');
    let w = this.windows.get(id);
    if (!w) {
      w = { who, logged: 0, suppressed: 0 };
      this.windows.set(id, w);
    }
    if (w.logged >= this.settings.linesPerWindow) {
      w.suppressed++;
      return;
    }
    w.logged++;
    const log: Logger = ctx.state.log ?? this.logger;
    log.info({ method: ctx.method, path: ctx.path.slice(0, 500), status: ctx.status, code: error?.code ?? null, param: error?.param ?? null, ...who }, 'request refused');
  }

  /** Ends every window now, reporting what each suppressed (on shutdown). */
  close(): void {
    this.windows.clear();
  }
}
