// prioq-client/node: the parts of a worker that need the Node.js process
// it runs in, kept apart so that the rest of the package runs in browsers.

import { hostname } from 'node:os';

import type { Worker } from './worker.js';

/** host-pid: tells worker processes apart in job views, as ps and logs do. */
export const hostWorkerName = `${hostname()}-${process.pid}`;

/**
 * Makes SIGTERM and SIGINT (Ctrl-C) stop `worker` (it finishes the job in
 * hand, then `run()` resolves) instead of killing the process; answers a
 * function that removes the handlers again.
 */
export function stopOnSignals(
  worker: Pick<Worker, 'stop'>,
  signals: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'],
): () => void {
  const stop = (): void => worker.stop();
  for (const signal of signals) process.on(signal, stop);
  return () => {
    for (const signal of signals) process.off(signal, stop);
  };
}
