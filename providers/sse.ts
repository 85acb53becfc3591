/**
 * Splits a server-sent-events byte stream into whole events, keeping each event's raw text so
 * it can be forwarded unchanged.
 */
export async function* sseEvents(body: AsyncIterable<Buffer | string>): AsyncGenerator<{ raw: string; data: string | null; event: string | null }> {
  let buf = '';
  for await (const chunk of body) {
    buf += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    let idx: number;
    while ((idx = boundary(buf)) >= 0) {
      const sep = buf.startsWith('\r\n\r\n', idx) ? 4 : 2;
      const raw = buf.slice(0, idx);
      buf = buf.slice(idx + sep);
      if (raw.trim()) yield parse(raw);
    }
  }
  if (buf.trim()) yield parse(buf);
}

function boundary(buf: string): number {
  const a = buf.indexOf('\n\n');
  const b = buf.indexOf('\r\n\r\n');
  if (a < 0) return b;
  if (b < 0) return a;
  return Math.min(a, b);
}

function parse(raw: string) {
  const data: string[] = [];
  let event: string | null = null;
  for (const line of raw.split(/\r?\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
    else if (line.startsWith('event:')) event = line.slice(6).trim();
  }
  return { raw, data: data.length ? data.join('\n') : null, event };
}
