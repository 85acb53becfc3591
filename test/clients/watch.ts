import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

// What the compatibility suite sees of a client besides its own output:
// - the tap, a recording reverse proxy in front of the gateway (the installer is fetched through
//   it, so the clients are configured with its address): every request with its JSON body, the
//   answer's status, request id, error text and number of SSE events, passed through unchanged;
// - the egress trap, the HTTP(S)_PROXY of every client run: it refuses whatever reaches it and
//   records it (telemetry, update checks and any other traffic not aimed at the gateway);
// - strace's connect()/DNS record of the run, when strace is installed: any connection to a
//   non-loopback address, proxy settings or not.

export interface Exchange {
  method: string;
  path: string;
  status: number;
  requestId: string | null;
  /** the request body, parsed when it is JSON */
  body: unknown;
  /** the answer's text when the status is 400 or more (first 4 KB) */
  error: string | null;
  /** x-gateway-ignored-params, when the gateway sent it */
  ignored: string | null;
  contentType: string;
  /** `data:` lines of an event-stream answer */
  sseEvents: number;
}

export interface Tap {
  url: string;
  /** The exchanges since the last call (completed answers only). */
  take(): Exchange[];
  close(): Promise<void>;
}

export async function startTap(target: string): Promise<Tap> {
  const upstream = new URL(target);
  let exchanges: Exchange[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      // The Host header is kept: the gateway writes it into the installer it serves.
      const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        const status = answer.statusCode ?? 0;
        const contentType = String(answer.headers['content-type'] ?? '');
        let text = '';
        let sseEvents = 0;
        let partial = '';
        answer.on('data', (c: Buffer) => {
          const s = c.toString();
          if (status >= 400 && text.length < 4096) text += s;
          if (contentType.startsWith('text/event-stream')) {
            const lines = (partial + s).split('\n');
            partial = lines.pop() ?? '';
            sseEvents += lines.filter((l) => l.startsWith('data:')).length;
          }
        });
        answer.on('end', () => {
          exchanges.push({
            method: req.method ?? '',
            path: req.url ?? '',
            status,
            requestId: (answer.headers['x-gateway-request-id'] as string | undefined) ?? null,
            body: parseJson(raw),
            error: status >= 400 ? text.slice(0, 4096) : null,
            ignored: (answer.headers['x-gateway-ignored-params'] as string | undefined) ?? null,
            contentType,
            sseEvents: sseEvents + (partial.startsWith('data:') ? 1 : 0),
          });
        });
        answer.pipe(res);
      });
      up.on('error', (err) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`tap: ${err.message}`);
      });
      up.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    take() {
      const out = exchanges;
      exchanges = [];
      return out;
    },
    close: () => closeServer(server),
  };
}

export interface EgressTrap {
  url: string;
  /** "CONNECT host:port" / "GET http://…" seen since the last call */
  take(): string[];
  close(): Promise<void>;
}

export async function startEgressTrap(): Promise<EgressTrap> {
  let seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(403).end();
  });
  server.on('connect', (req: http.IncomingMessage, socket) => {
    seen.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    take() {
      const out = seen;
      seen = [];
      return out;
    },
    close: () => closeServer(server),
  };
}

/**
 * Connections to non-loopback addresses and DNS lookups in an `strace -f -e trace=connect,sendto,sendmmsg`
 * log (lookups name the host asked for; a resolver's address alone says little).
 */
export function outsideAttempts(straceLog: string): string[] {
  const out = new Set<string>();
  if (!fs.existsSync(straceLog)) return [];
  const text = fs.readFileSync(straceLog, 'utf8');
  for (const line of text.split('\n')) {
    const v4 = /connect\(\d+, \{sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\("([\d.]+)"\)/.exec(line);
    if (v4 && !v4[2]!.startsWith('127.')) out.add(`connect ${v4[2]}:${v4[1]}`);
    const v6 = /connect\(\d+, \{sa_family=AF_INET6, sin6_port=htons\((\d+)\),.*inet_pton\(AF_INET6, "([^"]+)"/.exec(line);
    if (v6 && v6[2] !== '::1' && !v6[2]!.startsWith('::ffff:127.')) out.add(`connect [${v6[2]}]:${v6[1]}`);
    // A DNS question in strace's escaping: \6github\3com\0 (label lengths as octal escapes).
    if (/send(?:to|mmsg)\(/.test(line)) {
      const q = /((?:\\[0-7]{1,3}[A-Za-z0-9_-]+){2,})\\0/.exec(line);
      if (q) out.add(`DNS lookup ${q[1]!.split(/\\[0-7]{1,3}/).filter(Boolean).join('.')}`);
    }
  }
  return [...out];
}

function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return null;
  try {
    return JSON.parse(raw.toString());
  } catch {
    return raw.toString().slice(0, 200);
  }
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
