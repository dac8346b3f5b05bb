#!/usr/bin/env node
// A prioq worker in Node.js 20 or later, on the worker helper of the
// TypeScript client (clients/typescript, package prioq-client).
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
// Build the client first (again after it changes), then run the worker:
//
//   (cd clients/typescript && npm ci && npm run build)
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

import { setTimeout as sleep } from 'node:timers/promises';

import { Rejection, Worker, createClient } from '../clients/typescript/dist/index.js';
import { hostWorkerName, stopOnSignals } from '../clients/typescript/dist/node.js';

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

/** The line printed for each thing the worker does. */
function describe(event) {
  switch (event.type) {
    case 'polling':
      return `worker ${event.worker} polling ${event.queue}`;
    case 'claimed':
      return `claimed ${event.job.id} (${event.job.task})`;
    case 'acked':
      return `acked ${event.id}`;
    case 'nacked':
      return `nacked ${event.id}: ${event.error}`;
    case 'leaseLost':
      return `lease lost on ${event.id} (${event.code}): another worker may have it`;
    case 'heartbeatFailed':
      return `heartbeat for ${event.id} failed, retrying: ${event.error}`;
    case 'dropped':
      return event.during === 'task'
        ? `dropped ${event.id}: lease lost`
        : `dropped ${event.id}: ${event.code} (the lease ended before the ${event.during})`;
    case 'backingOff':
      return `backing off ${(event.delayMs / 1000).toFixed(1)} s: ${event.error}`;
    case 'retrying':
      return `${event.verb} of ${event.id} failed, retrying: ${event.error}`;
    case 'gaveUp':
      return `gave up on the ${event.verb} of ${event.id}: the job runs again once its lease runs out`;
    default:
      return `${event.type} ${JSON.stringify(event)}`;
  }
}

const { PRIOQ_URL: url, PRIOQ_QUEUE: queue, PRIOQ_TOKEN: token } = process.env;
if (!url || !queue) {
  console.error('worker: set PRIOQ_URL (e.g. http://127.0.0.1:8080) and PRIOQ_QUEUE');
  process.exit(2);
}

const worker = new Worker({
  client: createClient(url, { token }),
  queue,
  name: process.env.PRIOQ_WORKER || hostWorkerName,
  leaseMs: Number(process.env.PRIOQ_LEASE_MS ?? 30000),
  tasks: TASKS,
  onEvent: (event) => console.log(describe(event)),
});
stopOnSignals(worker);

try {
  await worker.run();
  console.log('stopped');
} catch (error) {
  if (error instanceof Rejection && error.status === 401) {
    console.error(`worker: prioq refused the token (${error.message}); set PRIOQ_TOKEN to a valid API token`);
  } else if (error instanceof Rejection) {
    console.error(`worker: prioq refused a request (${error.message}); check PRIOQ_QUEUE and PRIOQ_LEASE_MS`);
  } else {
    console.error(`worker: ${error.stack ?? error}`);
  }
  process.exitCode = 1;
}
