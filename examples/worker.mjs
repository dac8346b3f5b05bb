#!/usr/bin/env node
// A prioq worker in Node.js 20 or later, with nothing but the built-in
// fetch.
//
// It claims one job at a time, extends the job's lease every third of the
// lease while the job runs (a heartbeat, which also carries the task's
// latest progress report, at once when the task reports), and nacks the job
// with the error when its task throws. When the task resolves, the ack goes
// with the next claim, carrying what the task resolved to as the job's
// result; that claim does not wait (wait_ms 0), so the ack's outcome is
// known at once: a busy worker sends one request per job. When that claim
// finds nothing, the worker long-polls (wait_ms 10000) until a job comes.
// On SIGTERM or Ctrl-C it stops claiming, finishes the job in hand (and
// nacks it, or acks it on its own), and exits 0.
//
//   PRIOQ_URL=http://127.0.0.1:8080 PRIOQ_QUEUE=emails node examples/worker.mjs
//
// Environment:
//   PRIOQ_URL       prioq's address (required)
//   PRIOQ_QUEUE     the queue to work on (required)
//   PRIOQ_TOKEN     an API token, when prioq runs with PRIOQ_API_TOKENS
//   PRIOQ_LEASE_MS  the lease of each job, default 30000
//   PRIOQ_WORKER    the name shown as the job's worker, default host-pid
//
// Put your own tasks in TASKS: a task takes the job's args and a `report`
// function (call it with any JSON value to show how far the job got), and
// resolves to the job's result (any JSON value, kept while the queue
// retains completed jobs) or throws to fail the job.

import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

const TASKS = {
  echo: async (args) => {
    console.log(`  echo ${JSON.stringify(args)}`);
    return args;
  },
  sleep: async (args, report) => {
    const total = args.ms ?? 1000;
    for (let step = 1; step <= 10; step += 1) {
      await sleep(total / 10);
      report({ slept_ms: Math.floor((total * step) / 10), of_ms: total });
    }
    return { slept_ms: total };
  },
  fail: async (args) => {
    throw new Error(args.message ?? "task 'fail' always fails");
  },
};

const WAIT_MS = 10000; // long poll: prioq answers as soon as a job is claimable
const TRIES = 5; // for an ack or a nack while prioq or Redis is unavailable

/** prioq or its Redis cannot be reached now (network, 502, 503, 504): retry later. */
class Unavailable extends Error {}
/** 401: no token, or a wrong one. Retrying will not help. */
class Unauthorized extends Error {}
/** 404 not_found or 409 lease_lost: the job is no longer this worker's. */
class Gone extends Error {}
/** Any other 4xx: a bug in this worker or a wrong setting; retrying will not help. */
class Refused extends Error {}

const { PRIOQ_URL: url, PRIOQ_QUEUE: queue, PRIOQ_TOKEN: token } = process.env;
if (!url || !queue) {
  console.error('worker: set PRIOQ_URL (e.g. http://127.0.0.1:8080) and PRIOQ_QUEUE');
  process.exit(2);
}
const leaseMs = Number(process.env.PRIOQ_LEASE_MS ?? 30000);
const worker = process.env.PRIOQ_WORKER || `${hostname()}-${process.pid}`;
const base = `${url.replace(/\/+$/, '')}/v1/queues/${encodeURIComponent(queue)}`;

// Aborted by SIGTERM or SIGINT: cuts a long poll or a back-off short. A
// job in hand is finished first.
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
process.on('SIGINT', () => stop.abort());

/** POSTs JSON to one of the queue's routes; answers the decoded body or throws by status. */
async function post(path, body, { timeoutMs, signal }) {
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  let response;
  let text;
  try {
    response = await fetch(base + path, {
      method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.any(signals),
    });
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new Unavailable(error.cause?.code ?? error.message);
  }
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    if (response.ok) throw new Unavailable(`not JSON: ${text.slice(0, 100)}`);
  }
  if (response.ok) return data;
  const what = `${response.status} ${data?.code ?? response.statusText}: ${data?.detail ?? ''}`;
  if (response.status === 401) throw new Unauthorized(what);
  if (response.status === 404 || response.status === 409) throw new Gone(data?.code ?? String(response.status));
  if (response.status >= 500) throw new Unavailable(what);
  throw new Refused(what);
}

/** Milliseconds to wait after `failures` failures in a row: 0.5 s, 1 s, 2 s ... 30 s, with jitter. */
function backoff(failures) {
  return Math.min(500 * 2 ** (failures - 1), 30000) * (0.5 + Math.random() / 2);
}

/** How long a failed job waits before it is claimable again: 1 s, 2 s, 4 s ... 1 min. */
function retryDelayMs(attempts) {
  return Math.min(1000 * 2 ** attempts, 60000);
}

async function run() {
  console.log(`worker ${worker} polling ${queue}`);
  const claim = { worker, lease_ms: leaseMs, max_jobs: 1, wait_ms: WAIT_MS };
  let pending = null; // { id, lease_token, result } of the job done last: acked with the next claim
  let sent = 0; // claims sent that carry it
  let failures = 0;
  while (!stop.signal.aborted) {
    // With an ack, no wait: the ack's outcome comes back at once.
    const body = pending ? { ...claim, wait_ms: 0, ack: [pending] } : claim;
    if (pending) sent += 1;
    let answer;
    try {
      // A job claimed in the instant a signal cuts this short goes back to
      // the queue when its lease runs out.
      answer = await post('/claim', body, { timeoutMs: WAIT_MS + 10000, signal: stop.signal });
      failures = 0;
    } catch (error) {
      if (stop.signal.aborted) break;
      if (!(error instanceof Unavailable)) throw error;
      failures += 1;
      const pause = backoff(failures);
      console.log(`backing off ${(pause / 1000).toFixed(1)} s: ${error.message}`);
      await sleep(pause, undefined, { signal: stop.signal }).catch(() => {});
      continue; // the same claim, with the same ack: the token is safe to resend
    }
    if (pending) {
      reportAck(pending.id, answer.acked[0], sent);
      pending = null;
      sent = 0;
    }
    for (const job of answer.jobs) pending = await handle(job);
  }
  if (pending) {
    const path = `/jobs/${encodeURIComponent(pending.id)}`;
    const { id, ...body } = pending;
    await finish(path, id, 'ack', body, `acked ${id}`, sent);
  }
  console.log('stopped');
}

/** Logs the outcome of an ack sent with a claim, the `sent`th claim to carry it. */
function reportAck(id, result, sent) {
  if (result.status === 204 || (result.status === 404 && sent > 1)) {
    console.log(`acked ${id}`); // a 404 on a retry: an earlier try went through
  } else {
    console.log(`dropped ${id}: ${result.code ?? result.status} (the lease ended before the ack)`);
  }
}

/**
 * Runs the job; resolves to { id, lease_token, result } when it is to be
 * acked, else null.
 */
async function handle(job) {
  const path = `/jobs/${encodeURIComponent(job.id)}`;
  console.log(`claimed ${job.id} (${job.task})`);
  let lost = false;
  let beating = Promise.resolve();
  let progress; // the task's latest report, sent with the next beat
  const beat = () => {
    if (lost) return;
    const body = { lease_token: job.lease_token, lease_ms: leaseMs };
    if (progress !== undefined) body.progress = progress;
    progress = undefined;
    beating = beating.then(() => post(`${path}/extend`, body, { timeoutMs: leaseMs / 3 }))
      .catch((error) => {
        if (error instanceof Gone) {
          console.log(`lease lost on ${job.id} (${error.message}): another worker may have it`);
          lost = true;
          clearInterval(beats);
        } else {
          // The lease still runs; the next beat tries again (the report is dropped).
          console.log(`heartbeat for ${job.id} failed, retrying: ${error.message}`);
        }
      });
  };
  const beats = setInterval(beat, leaseMs / 3);
  const report = (value) => {
    progress = value;
    beat();
  };
  let failure;
  let result;
  try {
    const task = TASKS[job.task];
    if (!task) throw new Error(`no task named ${JSON.stringify(job.task)} in this worker`);
    result = await task(job.args, report);
  } catch (error) {
    failure = `${error?.name ?? 'Error'}: ${error?.message ?? error}`;
  } finally {
    clearInterval(beats);
    await beating;
  }
  if (lost) {
    console.log(`dropped ${job.id}: lease lost`);
  } else if (failure === undefined) {
    return { id: job.id, lease_token: job.lease_token, ...(result === undefined ? {} : { result }) };
  } else {
    const body = { lease_token: job.lease_token, error: failure.slice(0, 2000), delay_ms: retryDelayMs(job.attempts) };
    await finish(path, job.id, 'nack', body, `nacked ${job.id}: ${failure}`);
  }
  return null;
}

/**
 * Acks or nacks, retrying while prioq is unavailable; the same token is safe
 * to resend. `sent`: claims that carried this ack and may have reached prioq.
 */
async function finish(path, id, verb, body, message, sent = 0) {
  for (let attempt = 1; attempt <= TRIES; attempt += 1) {
    try {
      await post(`${path}/${verb}`, body, { timeoutMs: 10000 });
      console.log(message);
      return;
    } catch (error) {
      if (error instanceof Gone) {
        if (verb === 'ack' && attempt + sent > 1 && error.message === 'not_found') {
          console.log(message); // an earlier try went through: the job is done
        } else {
          console.log(`dropped ${id}: ${error.message} (the lease ended before the ${verb})`);
        }
        return;
      }
      if (!(error instanceof Unavailable)) throw error;
      console.log(`${verb} of ${id} failed, retrying: ${error.message}`);
      await sleep(backoff(attempt));
    }
  }
  console.log(`gave up on the ${verb} of ${id}: the job runs again once its lease runs out`);
}

try {
  await run();
} catch (error) {
  if (error instanceof Unauthorized) {
    console.error(`worker: prioq refused the token (${error.message}); set PRIOQ_TOKEN to a valid API token`);
  } else if (error instanceof Refused) {
    console.error(`worker: prioq refused a request (${error.message}); check PRIOQ_QUEUE and PRIOQ_LEASE_MS`);
  } else {
    console.error(`worker: ${error.stack ?? error}`);
  }
  process.exitCode = 1;
}
