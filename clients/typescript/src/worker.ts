// The worker helper: claims jobs from one queue, one at a time, runs the
// task each names, keeps the job's lease alive while the task runs, and acks
// the job with its next claim or nacks it with the error. Only fetch,
// AbortController and timers: it runs in browsers as well as in Node.js.

import type * as Otel from '@opentelemetry/api';

import type { PrioqClient } from './index.js';
import type { components } from './schema.js';

type AckEntry = components['schemas']['AckEntry'];
type AckResult = components['schemas']['AckResult'];
type ClaimRequest = components['schemas']['ClaimRequest'];
type ExtendRequest = components['schemas']['ExtendRequest'];
type JobView = components['schemas']['JobView'];
type NackRequest = components['schemas']['NackRequest'];

/**
 * Shows how far a job got: any JSON value, sent at once with a heartbeat
 * and shown as the job's `progress` until the job ends.
 */
export type Report = (progress: unknown) => void;

/**
 * Runs one job: takes its args, a `report` function and the job itself, and
 * returns or resolves to the job's result (any JSON value, kept while the
 * queue retains completed jobs; undefined for none), or throws to fail it.
 */
// `any`, not `unknown`: a task may declare the args it expects.
// `cancelled` aborts when prioq asks the job to stop (a cancel): the task
// should stop soon; the job ends `cancelled` whether it returns or throws.
export type Task = (args: any, report: Report, job: JobView, cancelled: AbortSignal) => unknown;

/** What a worker does, for its owner to log: the library prints nothing. */
export type WorkerEvent =
  /** The worker starts its claim loop. */
  | { type: 'polling'; worker: string; queue: string }
  /** A job came; its task starts. */
  | { type: 'claimed'; job: JobView }
  /** prioq took the ack: the job is done. */
  | { type: 'acked'; id: string }
  /** The task failed and prioq took the nack; `error` is what it threw. */
  | { type: 'nacked'; id: string; error: string }
  /** An extend answered 404 or 409 (`code`): another worker may have the job. */
  | { type: 'leaseLost'; id: string; code: string }
  /** prioq asked the job to stop (a cancel): its task's signal aborts and extends stop. */
  | { type: 'cancelRequested'; id: string }
  /** An extend failed otherwise; the lease still runs and the next heartbeat tries again. */
  | { type: 'heartbeatFailed'; id: string; error: string }
  /**
   * The job's outcome was not delivered because its lease had ended: while
   * the task ran (`during: 'task'`), or when the ack or nack came (`code`
   * says what prioq answered). The job runs again elsewhere.
   */
  | { type: 'dropped'; id: string; code: string; during: 'task' | 'ack' | 'nack' }
  /** A claim failed for want of prioq or its Redis; the same claim goes again after `delayMs`. */
  | { type: 'backingOff'; delayMs: number; error: string }
  /** An ack or a nack failed for want of prioq or its Redis, and goes again. */
  | { type: 'retrying'; id: string; verb: 'ack' | 'nack'; error: string }
  /** An ack or a nack failed too often; the job runs again once its lease ends. */
  | { type: 'gaveUp'; id: string; verb: 'ack' | 'nack' };

export interface WorkerOptions {
  /** The prioq to work for, from createClient. */
  client: PrioqClient;
  /** The queue to claim from. */
  queue: string;
  /**
   * Shown as the worker of the jobs it holds; default `worker-` and a
   * random suffix (in Node.js, `hostWorkerName` of prioq-client/node gives
   * host-pid).
   */
  name?: string | undefined;
  /** The lease of each job, in ms (100 to 43200000); default 30000. */
  leaseMs?: number | undefined;
  /** How long an idle claim waits for a job (long poll), in ms (0 to 20000); default 10000. */
  waitMs?: number | undefined;
  /** Tasks by name; `register` adds more. */
  tasks?: Record<string, Task> | undefined;
  /** Told of everything the worker does. */
  onEvent?: ((event: WorkerEvent) => void) | undefined;
}

/**
 * An answer from prioq that retrying will not change: 401 for a missing or
 * wrong token, another 4xx for a bug or a wrong setting. `run()` rejects
 * with it.
 */
export class Rejection extends Error {
  override name = 'Rejection';

  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The problem's `code`, when the answer was a problem. */
    readonly code: string | undefined,
    /** The problem's `detail`, when the answer was a problem. */
    readonly detail: string | undefined,
    statusText: string,
  ) {
    super(`${status} ${code ?? statusText}: ${detail ?? ''}`);
  }
}

/** 404 or 409 on a job: it is no longer this worker's to finish. */
class JobLoss extends Rejection {
  override name = 'JobLoss';
}

/** prioq or its Redis cannot be reached now (network, 5xx): worth trying again later. */
class Outage extends Error {
  override name = 'Outage';
}

/** The answer of an openapi-fetch call, whatever its path. */
interface Answer<D> {
  data?: D;
  error?: unknown;
  response: Response;
}

/** Tries of an ack or a nack while prioq or its Redis is unavailable. */
const TRIES = 5;

/**
 * Runs tasks for the jobs of one queue until `stop()`:
 *
 *     const worker = new Worker({ client, queue: 'emails', tasks: { send } });
 *     await worker.run();
 *
 * A Worker runs once. `run()` resolves after `stop()`, once the job in hand
 * is finished and its outcome delivered; it rejects with a Rejection when
 * prioq refuses the token or a request.
 */
export class Worker {
  readonly queue: string;
  readonly name: string;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly #client: PrioqClient;
  readonly #tasks = new Map<string, Task>();
  readonly #onEvent: (event: WorkerEvent) => void;
  // Aborted by stop(): cuts a long poll or a back-off short; a job in hand
  // is finished first.
  readonly #stopping = new AbortController();
  #started = false;

  constructor(options: WorkerOptions) {
    this.#client = options.client;
    this.queue = options.queue;
    this.name = options.name || `worker-${Math.random().toString(16).slice(2, 10)}`;
    this.leaseMs = options.leaseMs ?? 30000;
    this.waitMs = options.waitMs ?? 10000;
    this.#onEvent = options.onEvent ?? (() => {});
    for (const [name, task] of Object.entries(options.tasks ?? {})) this.register(name, task);
  }

  /** Runs `task` for the jobs whose task is `name`. */
  register(name: string, task: Task): this {
    this.#tasks.set(name, task);
    return this;
  }

  /** Stops claiming; `run()` resolves once the job in hand is finished. */
  stop(): void {
    this.#stopping.abort();
  }

  /** Claims and runs jobs until stop(). */
  async run(): Promise<void> {
    if (this.#started) throw new Error('a Worker runs once; make a new one');
    this.#started = true;
    const stopping = this.#stopping.signal;
    const path = { queue: this.queue };
    this.#emit({ type: 'polling', worker: this.name, queue: this.queue });
    const claim: ClaimRequest = { worker: this.name, lease_ms: this.leaseMs, max_jobs: 1, wait_ms: this.waitMs };
    let pending: AckEntry | null = null; // the job done last: acked with the next claim
    let sent = 0; // claims sent that carry it
    let failures = 0;
    let retried: ClaimRequest | null = null; // a claim to send again, with its request id
    while (!stopping.aborted) {
      // With an ack, no wait: the ack's outcome comes back at once. A new
      // request id per claim; a retry sends the same one.
      const body: ClaimRequest = retried ?? {
        ...claim,
        request_id: globalThis.crypto.randomUUID(),
        ...(pending ? { wait_ms: 0, ack: [pending] } : {}),
      };
      retried = null;
      if (pending) sent += 1;
      let jobs: JobView[];
      let acked: AckResult[] | null | undefined;
      try {
        // A job claimed in the instant a stop cuts this short goes back to
        // the queue when its lease runs out.
        ({ jobs, acked } = await this.#send(
          (signal) => this.#client.POST('/v1/queues/{queue}/claim', { params: { path }, body, signal }),
          this.waitMs + 10000,
          stopping,
        ));
        failures = 0;
      } catch (error) {
        if (stopping.aborted) break;
        if (!(error instanceof Outage)) throw error;
        failures += 1;
        const delayMs = backoffMs(failures);
        this.#emit({ type: 'backingOff', delayMs, error: error.message });
        await pause(delayMs, stopping);
        retried = body; // the same claim, request id and ack: a repeat answers what it leased
        continue;
      }
      if (pending) {
        this.#settleAck(pending.id, acked?.[0], sent);
        pending = null;
        sent = 0;
      }
      for (const job of jobs) pending = await this.#handle(job);
    }
    if (pending) await this.#ack(pending, sent);
  }

  #emit(event: WorkerEvent): void {
    this.#onEvent(event);
  }

  /** Reports the outcome of an ack sent with a claim, the `sent`th claim to carry it. */
  #settleAck(id: string, outcome: AckResult | undefined, sent: number): void {
    // A 404 on a resend: an earlier try went through.
    if (outcome?.status === 204 || (outcome?.status === 404 && sent > 1)) {
      this.#emit({ type: 'acked', id });
    } else {
      const code = outcome ? (outcome.code ?? String(outcome.status)) : 'no outcome';
      this.#emit({ type: 'dropped', id, code, during: 'ack' });
    }
  }

  /** Runs the job's task; answers the job's ack when it is to be acked, else null. */
  async #handle(job: JobView): Promise<AckEntry | null> {
    const { id, lease_token: token } = job;
    if (!token) throw new Error(`prioq handed out job ${id} without a lease token`);
    const path = { queue: this.queue, id };
    this.#emit({ type: 'claimed', job });
    let lost: string | undefined; // the code of the extend that found the lease gone
    let ended = false; // a report after the task ended must not extend a job already acked
    let beating = Promise.resolve();
    let progress: { value: unknown } | undefined; // the task's latest report, sent with the next beat
    const cancel = new AbortController();
    const beat = (): void => {
      if (lost !== undefined || ended || cancel.signal.aborted) return;
      const body: ExtendRequest = { lease_token: token, lease_ms: this.leaseMs };
      if (progress) body.progress = progress.value;
      progress = undefined;
      beating = beating
        .then(() => this.#send(
          (signal) => this.#client.POST('/v1/queues/{queue}/jobs/{id}/extend', { params: { path }, body, signal }),
          this.leaseMs / 3,
        ))
        .then(
          (answer) => {
            if (answer?.cancel_requested && !cancel.signal.aborted) {
              // No more extends: the job ends cancelled with its ack, nack or lease.
              clearInterval(beats);
              cancel.abort();
              this.#emit({ type: 'cancelRequested', id });
            }
          },
          (error: unknown) => {
            if (error instanceof JobLoss) {
              lost = error.code ?? String(error.status);
              clearInterval(beats);
              this.#emit({ type: 'leaseLost', id, code: lost });
            } else {
              // The lease still runs; the next beat tries again (the report is dropped).
              this.#emit({ type: 'heartbeatFailed', id, error: describe(error) });
            }
          },
        );
    };
    const beats = setInterval(beat, this.leaseMs / 3);
    const report: Report = (value) => {
      progress = { value };
      beat();
    };
    let failure: string | undefined;
    let result: unknown;
    try {
      const task = this.#tasks.get(job.task);
      if (!task) throw new Error(`no task named ${JSON.stringify(job.task)} in this worker`);
      result = await withProcessSpan(this.queue, job, () => task(job.args, report, job, cancel.signal));
      // Throws here, failing the job, rather than in each resend of the
      // claim that would carry it.
      JSON.stringify(result);
    } catch (error) {
      failure = error instanceof Error ? `${error.name}: ${error.message}` : `Error: ${String(error)}`;
    } finally {
      ended = true;
      clearInterval(beats);
      await beating;
    }
    if (lost !== undefined) {
      this.#emit({ type: 'dropped', id, code: lost, during: 'task' });
    } else if (failure === undefined) {
      return { id, lease_token: token, ...(result === undefined ? {} : { result }) };
    } else {
      // By code point: a cut surrogate pair is not valid JSON text for prioq.
      const error = Array.from(failure).slice(0, 2000).join('');
      const body: NackRequest = { lease_token: token, error, delay_ms: retryDelayMs(job.attempts) };
      await this.#deliver(
        'nack',
        id,
        0,
        (signal) => this.#client.POST('/v1/queues/{queue}/jobs/{id}/nack', { params: { path }, body, signal }),
        { type: 'nacked', id, error: failure },
      );
    }
    return null;
  }

  /** Acks on its own; `sent`: claims that carried this ack and may have reached prioq. */
  async #ack({ id, ...body }: AckEntry, sent: number): Promise<void> {
    const path = { queue: this.queue, id };
    await this.#deliver(
      'ack',
      id,
      sent,
      (signal) => this.#client.POST('/v1/queues/{queue}/jobs/{id}/ack', { params: { path }, body, signal }),
      { type: 'acked', id },
    );
  }

  /**
   * Sends an ack or a nack, retrying while prioq is unavailable (the same
   * token is safe to resend), and reports `done` once prioq took it.
   * `sent`: earlier requests that carried this ack and may have reached
   * prioq.
   */
  async #deliver(
    verb: 'ack' | 'nack',
    id: string,
    sent: number,
    request: (signal: AbortSignal) => Promise<Answer<unknown>>,
    done: WorkerEvent,
  ): Promise<void> {
    for (let attempt = 1; attempt <= TRIES; attempt += 1) {
      try {
        await this.#send(request, 10000);
        this.#emit(done);
        return;
      } catch (error) {
        if (error instanceof JobLoss) {
          if (verb === 'ack' && attempt + sent > 1 && error.code === 'not_found') {
            this.#emit(done); // an earlier try went through: the job is done
          } else {
            this.#emit({ type: 'dropped', id, code: error.code ?? String(error.status), during: verb });
          }
          return;
        }
        if (!(error instanceof Outage)) throw error;
        this.#emit({ type: 'retrying', id, verb, error: error.message });
        await pause(backoffMs(attempt));
      }
    }
    this.#emit({ type: 'gaveUp', id, verb });
  }

  /**
   * Sends one request, giving up after `timeoutMs` or when `cut` aborts;
   * answers the body of a success and throws an Outage, a JobLoss or a
   * Rejection otherwise (or the abort, when `cut` aborted).
   */
  async #send<D>(
    request: (signal: AbortSignal) => Promise<Answer<D>>,
    timeoutMs: number,
    cut?: AbortSignal,
  ): Promise<D> {
    const { signal, release } = bound(timeoutMs, cut);
    let answer: Answer<D>;
    try {
      answer = await request(signal);
    } catch (error) {
      if (cut?.aborted) throw error;
      // Node.js's fetch names the network failure in `cause`.
      const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined)?.code : undefined;
      throw new Outage(typeof cause === 'string' ? cause : describe(error));
    } finally {
      release();
    }
    const { data, error, response } = answer;
    if (response.ok) return data as D;
    const problem = typeof error === 'object' && error !== null ? (error as Record<string, unknown>) : {};
    const code = typeof problem.code === 'string' ? problem.code : undefined;
    const detail = typeof problem.detail === 'string' ? problem.detail : undefined;
    const { status, statusText } = response;
    if (status >= 500) throw new Outage(`${status} ${code ?? statusText}: ${detail ?? ''}`);
    if (status === 404 || status === 409) throw new JobLoss(status, code, detail, statusText);
    throw new Rejection(status, code, detail, statusText);
  }
}

/** The message of anything thrown. */
function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A signal that aborts after `ms` or when `cut` aborts, and a function that
 * releases its timer (which would otherwise keep Node.js running).
 */
function bound(ms: number, cut?: AbortSignal): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const expire = (): void => controller.abort(new DOMException(`no answer within ${ms} ms`, 'TimeoutError'));
  const follow = (): void => controller.abort(cut?.reason);
  const timer = setTimeout(expire, ms);
  if (cut?.aborted) follow();
  cut?.addEventListener('abort', follow, { once: true });
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      cut?.removeEventListener('abort', follow);
    },
  };
}

/** Waits `ms`, or less when `cut` aborts first. */
export function pause(ms: number, cut?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (cut?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      cut?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    cut?.addEventListener('abort', done, { once: true });
  });
}

/** Milliseconds to wait after `failures` failures in a row: 0.5 s, 1 s, 2 s ... 30 s, with jitter. */
export function backoffMs(failures: number): number {
  return Math.min(500 * 2 ** (failures - 1), 30000) * (0.5 + Math.random() / 2);
}

/** How long a failed job waits before it is claimable again: 1 s, 2 s, 4 s ... 1 min. */
function retryDelayMs(attempts: number): number {
  return Math.min(1000 * 2 ** attempts, 60000);
}

/** The module name of OpenTelemetry's API, imported only when it is there. */
const OPENTELEMETRY = '@opentelemetry/api';
let opentelemetry: Promise<typeof Otel | undefined> | undefined;

/**
 * Runs `run` in the job's consumer span `process {queue}` when OpenTelemetry's
 * API can be imported (without it, just runs it): a child of the trace the
 * job's enqueue came with on its first delivery (attempts 0), the root of a
 * new trace linked to it on later ones, a root span for a job without one.
 * The span is active while the task runs, and failed when it throws.
 */
async function withProcessSpan<T>(queue: string, job: JobView, run: () => T | Promise<T>): Promise<T> {
  // A module name in a variable: bundlers and TypeScript leave it to run time.
  opentelemetry ??= import(OPENTELEMETRY).then(
    (api: typeof Otel) => api,
    () => undefined,
  );
  const api = await opentelemetry;
  if (!api) return run();
  const enqueued = spanContextOf(api, job.trace);
  let parent = api.ROOT_CONTEXT;
  const links: Otel.Link[] = [];
  if (enqueued && job.attempts === 0) parent = api.trace.setSpanContext(api.ROOT_CONTEXT, enqueued);
  else if (enqueued) links.push({ context: enqueued });
  const attributes = {
    'messaging.system': 'prioq',
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.destination.name': queue,
    'messaging.message.id': job.id,
    'prioq.job.task': job.task,
    'prioq.job.attempts': job.attempts,
  };
  const tracer = api.trace.getTracer('prioq-client/worker');
  const options = { kind: api.SpanKind.CONSUMER, links, attributes };
  return tracer.startActiveSpan(`process ${queue}`, options, parent, async (span) => {
    try {
      return await run();
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The span context of a job's W3C `traceparent` (version 00), or undefined. */
function spanContextOf(api: typeof Otel, trace: JobView['trace']): Otel.SpanContext | undefined {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(trace?.traceparent ?? '');
  if (!match) return undefined;
  const context: Otel.SpanContext = {
    traceId: match[1],
    spanId: match[2],
    traceFlags: Number.parseInt(match[3], 16),
    isRemote: true,
  };
  if (trace?.tracestate) context.traceState = api.createTraceState(trace.tracestate);
  return api.isSpanContextValid(context) ? context : undefined;
}
