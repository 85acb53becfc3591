// Stream writer shared by every streaming format (server-sent events; Bedrock's binary
// event-stream frames): chunk_delay between frames, back-pressure, and the drop_after fault. Frames come from a lazy iterable so a long answer
// is never held in memory as a whole.
import type { ServerResponse } from 'node:http';
import { drained, pause } from './http';

export interface Frame {
  /** Bytes of the frame (an SSE frame includes the blank line that ends it). */
  text: string | Uint8Array;
  /** Content deltas (text or tool-argument fragments) are what drop_after counts. */
  counted: boolean;
}

export interface StreamOptions {
  /** ms between frames (not before the first). */
  delay: number;
  /** The drop_after control, if set. */
  dropAfter: number | undefined;
  /** How many counted frames the stream holds. */
  countedTotal: number;
  /** default text/event-stream */
  contentType?: string;
}

/** A `data: <json>` frame (chat completions). */
export function dataFrame(value: unknown, counted = false): Frame {
  return { text: `data: ${JSON.stringify(value)}\n\n`, counted };
}

/** An `event: <type>` + `data: <json>` frame (Anthropic Messages, OpenAI Responses). */
export function eventFrame(type: string, value: unknown, counted = false): Frame {
  return { text: `event: ${type}\ndata: ${JSON.stringify(value)}\n\n`, counted };
}

/**
 * Streams the frames, then ends the response. drop_after=N destroys the socket once the
 * min(N, countedTotal)-th counted frame reached the kernel (so a drop always happens; with 0,
 * after the first frame). Resolves false when the client closed the connection first.
 */
export async function writeStream(res: ServerResponse, frames: Iterable<Frame>, opts: StreamOptions): Promise<boolean> {
  res.writeHead(200, {
    'content-type': opts.contentType ?? 'text/event-stream',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();

  const dropAt = opts.dropAfter === undefined ? -1 : Math.min(opts.dropAfter, opts.countedTotal);
  let first = true;
  let counted = 0;
  for (const frame of frames) {
    if (!first && !(await pause(opts.delay, res))) return false;
    const isFirst = first;
    first = false;
    if (res.destroyed) return false;
    if (frame.counted) counted += 1;
    if (dropAt === 0 ? isFirst : frame.counted && counted === dropAt) {
      // Destroy once these bytes reached the kernel, so the client does see them.
      res.write(frame.text, () => res.destroy());
      return true;
    }
    if (!res.write(frame.text) && !(await drained(res))) return false;
  }
  res.end();
  return true;
}
