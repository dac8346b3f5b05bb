// The worker helper against a live prioq and a real Redis, for what the
// example worker's end-to-end tests (tests/e2e/workers.test.mjs) do not
// reach: a lost lease, a task that is unknown or whose result is not JSON,
// a refused request, and stops. Needs the built client (npm run build) and
// the prioq binary (PRIOQ_BIN, as for tests/e2e):
//
//   PRIOQ_BIN=target/debug/prioq node --test clients/typescript/test/

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { killAll, startPrioq, startRedis } from '../../../tests/e2e/support.mjs';
import { Rejection, Worker, createClient } from '../dist/index.js';

const TOKEN = 'client-token';

let redis;
let prioq;
let client;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis, { tokens: [TOKEN] });
  client = createClient(`${prioq.base}/`, { token: TOKEN });
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

/**
 * Enqueues `jobs` ({ id, task }, failing at their first failure), runs a
 * worker with `tasks` until it has dealt with the last of them, and answers
 * its events.
 */
async function work(queue, tasks, jobs) {
  const events = [];
  const last = jobs.at(-1).id;
  const worker = new Worker({
    client,
    queue,
    leaseMs: 1000,
    waitMs: 500,
    tasks,
    onEvent: (event) => {
      events.push(event);
      if (['acked', 'nacked', 'dropped'].includes(event.type) && event.id === last) worker.stop();
    },
  });
  for (const job of jobs) await prioq.api.enqueue(queue, { max_attempts: 1, ...job });
  await worker.run();
  return events;
}

test('a job whose lease is gone is dropped, not acked', async () => {
  const tasks = {
    // Acks its own job behind the worker's back: the next extend finds it gone.
    steal: async (args, report, job) => {
      const { error } = await client.POST('/v1/queues/{queue}/jobs/{id}/ack', {
        params: { path: { queue: 'lost', id: job.id } },
        body: { lease_token: job.lease_token },
      });
      assert.equal(error, undefined);
      report({ after: 'ack' });
      return 'never sent';
    },
  };
  const events = await work('lost', tasks, [{ id: 'stolen', task: 'steal' }]);
  assert.deepEqual(events.filter((event) => event.id === 'stolen' && event.type !== 'claimed'), [
    { type: 'leaseLost', id: 'stolen', code: 'not_found' },
    { type: 'dropped', id: 'stolen', code: 'not_found', during: 'task' },
  ]);
});

test('an unknown task and a result that is not JSON fail their jobs', async () => {
  const tasks = { bigint: async () => 10n };
  const events = await work('odd', tasks, [{ id: 'big', task: 'bigint' }, { id: 'nameless', task: 'nope' }]);
  const nacks = events.filter((event) => event.type === 'nacked');
  assert.deepEqual(nacks.map((event) => event.id), ['big', 'nameless']);
  assert.match(nacks[0].error, /^TypeError: .*BigInt/);
  assert.equal(nacks[1].error, 'Error: no task named "nope" in this worker');
  const dead = (await prioq.api.job('odd', 'nameless')).body;
  assert.deepEqual([dead.state, dead.last_error], ['dead', nacks[1].error]);
});

test('a refused request stops the worker with a Rejection', async () => {
  const worker = new Worker({ client, queue: 'refused', leaseMs: 50 });
  await assert.rejects(worker.run(), (error) => {
    assert.ok(error instanceof Rejection, String(error));
    assert.deepEqual([error.status, error.code], [422, 'validation_failed']);
    return true;
  });
  await assert.rejects(worker.run(), /runs once/);
});

test('stop cuts a long poll short at once', async () => {
  const worker = new Worker({ client, queue: 'idle', waitMs: 20000 });
  const running = worker.run();
  await new Promise((resolve) => setTimeout(resolve, 300));
  const stopped = Date.now();
  worker.stop();
  await running;
  assert.ok(Date.now() - stopped < 500, `took ${Date.now() - stopped} ms`);
});

test('a cancel while the task runs aborts its signal, stops the extends, and the job ends cancelled', async () => {
  const queue = 'cancelled';
  const tasks = {
    // Cancels its own job, then waits for the worker to tell it.
    long: async (args, report, job, cancelled) => {
      const { error } = await client.POST('/v1/queues/{queue}/jobs/{id}/cancel', {
        params: { path: { queue, id: job.id } },
        body: { reason: 'changed my mind' },
      });
      assert.equal(error, undefined);
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no abort within 5 s')), 5000);
        cancelled.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      return { stopped: true };
    },
  };
  const events = await work(queue, tasks, [{ id: 'long-1', task: 'long', retain_ms: 60000 }]);
  assert.deepEqual(
    events.filter((event) => event.id === 'long-1' && event.type !== 'claimed').map((event) => event.type),
    ['cancelRequested', 'acked'],
  );
  const job = (await prioq.api.job(queue, 'long-1')).body;
  assert.deepEqual([job.state, job.cancel_reason, job.result], ['cancelled', 'changed my mind', { stopped: true }]);
});
