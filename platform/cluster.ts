import cluster, { type Worker } from 'node:cluster';
import type { Logger } from './logger';

// N processes serving one port (node:cluster: the primary holds the listening socket and hands
// connections to the children in turn). The primary serves nothing: it starts the children, starts
// again one that died (after a second, so a child failing at start does not spin), and at stop sends
// each SIGTERM and waits for it to drain and exit.

export interface ClusterOptions {
  /** how many children */
  count: number;
  /** the children's entry file: dist/'s .js, or a .ts source run through tsx */
  exec: string;
  /** extra environment for the children */
  env?: NodeJS.ProcessEnv;
  logger: Logger;
  /** what the children are, for the logs */
  name: string;
}

export interface Supervised {
  /** the children's process ids now */
  pids(): number[];
  /** SIGTERM to every child; resolves once all have exited */
  stop(): Promise<void>;
}

const RESTART_DELAY_MS = 1000;

/** Starts `count` children and resolves once each listens (rejects if one exits first). */
export async function superviseCluster(o: ClusterOptions): Promise<Supervised> {
  // A .ts entry (sources, not dist/) needs tsx in the child too, unless the primary was started by its CLI.
  const needsTsx = o.exec.endsWith('.ts') && !process.execArgv.some((a) => a.includes('tsx'));
  cluster.setupPrimary({ exec: o.exec, execArgv: needsTsx ? [...process.execArgv, '--require', require.resolve('tsx/cjs')] : process.execArgv });
  const children = new Set<Worker>();
  let stopping = false;
  const fork = (): Promise<void> => {
    const child = cluster.fork(o.env);
    children.add(child);
    return new Promise<void>((resolve, reject) => {
      child.once('listening', (address) => {
        o.logger.info({ pid: child.process.pid, port: address.port, name: o.name }, `${o.name}: child listening`);
        resolve();
      });
      child.once('exit', (code, signal) => {
        children.delete(child);
        reject(new Error(`${o.name}: child ${child.process.pid} exited (${signal ?? code}) before it listened`));
        if (stopping) return;
        o.logger.error({ pid: child.process.pid, code, signal, name: o.name }, `${o.name}: child died; starting another`);
        setTimeout(() => {
          if (!stopping) fork().catch((err) => o.logger.error({ err }, `${o.name}: restart failed`));
        }, RESTART_DELAY_MS).unref();
      });
    });
  };
  const stop = async () => {
    stopping = true;
    await Promise.all(
      [...children].map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.isDead()) return resolve();
            child.once('exit', () => resolve());
            child.process.kill('SIGTERM');
          }),
      ),
    );
  };
  try {
    await Promise.all(Array.from({ length: o.count }, fork));
  } catch (err) {
    await stop();
    throw err;
  }
  return { pids: () => [...children].map((c) => c.process.pid!).filter(Boolean), stop };
}
