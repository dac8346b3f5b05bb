// A producer's enqueue that backs off while prioq asks it to wait.

import type { Client } from 'openapi-fetch';

import type { components, paths } from './schema.js';
import { Rejection, backoffMs, pause } from './worker.js';

/** A job to enqueue: the body of `POST /v1/queues/{queue}/jobs`. */
export type NewJob = components['schemas']['EnqueueRequest'];

/** How long `enqueue` keeps trying, and how to stop it. */
export interface EnqueueOptions {
  /** Stop backing off after this long (default 60 s): the last refusal is thrown. */
  giveUpAfterMs?: number | undefined;
  /** Aborts the enqueue, its back-off included. */
  signal?: AbortSignal | undefined;
}

/**
 * Enqueues `job` on `queue` and answers the job: the one made (201), or the
 * one already known under its id or dedup key (200). It sends the same body
 * again, after a back-off, while prioq asks it to wait:
 *
 * - 429 `queue_full`: the queue holds its `max_pending`; it waits at least
 *   the answer's `Retry-After`, and longer (0.5 s, 1 s ... 30 s, with
 *   jitter) the longer the queue stays full;
 * - 503 with `effect: none`: nothing happened, so sending again is safe;
 * - no answer, a 502, or a 503 of unknown effect: only when the job has an
 *   `id`, which makes a second send add nothing (without one, a resend
 *   could add the job twice, so the failure is thrown).
 *
 * Any other refusal is thrown at once as a Rejection, and so is the last
 * one when `giveUpAfterMs` runs out.
 */
export async function enqueue(
  client: Client<paths>,
  queue: string,
  job: NewJob,
  options: EnqueueOptions = {},
): Promise<components['schemas']['JobView']> {
  const { giveUpAfterMs = 60000, signal } = options;
  const deadline = Date.now() + giveUpAfterMs;
  const idempotent = typeof job.id === 'string';
  for (let failures = 1; ; failures += 1) {
    let last: unknown;
    let waitMs = backoffMs(failures);
    try {
      const { data, error, response } = await client.POST('/v1/queues/{queue}/jobs', {
        params: { path: { queue } },
        body: job,
        ...(signal ? { signal } : {}),
      });
      if (data !== undefined && response.ok) return data;
      const problem = typeof error === 'object' && error !== null ? (error as Record<string, unknown>) : {};
      const code = typeof problem.code === 'string' ? problem.code : undefined;
      const detail = typeof problem.detail === 'string' ? problem.detail : undefined;
      last = new Rejection(response.status, code, detail, response.statusText);
      const { status } = response;
      const again =
        status === 429 ||
        (status === 503 && (problem.effect === 'none' || idempotent)) ||
        (status === 502 && idempotent);
      if (!again) throw last;
      waitMs = Math.max(waitMs, retryAfterMs(response.headers.get('retry-after')));
    } catch (error) {
      if (error instanceof Rejection || signal?.aborted || !idempotent) throw error;
      last = error;
    }
    if (Date.now() + waitMs > deadline) throw last;
    await pause(waitMs, signal);
    if (signal?.aborted) throw signal.reason;
  }
}

/** The wait a `Retry-After` header asks for (ms): seconds, or an HTTP date; 0 for none. */
function retryAfterMs(header: string | null): number {
  if (header === null) return 0;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? 0 : Math.max(0, at - Date.now());
}
