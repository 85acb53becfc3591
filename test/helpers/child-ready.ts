import type { ChildProcess } from 'node:child_process';

// The URL a child process of the tests prints as `ready <url>` once it serves (gateway-child.ts,
// panel-child.ts); rejected when the child exits first.

export function readyUrl(child: ChildProcess, what: string, stderr: () => string = () => ''): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += String(d);
      const m = /ready (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`${what} exited ${code}${stderr() ? `: ${stderr()}` : ''}`)));
  });
}
