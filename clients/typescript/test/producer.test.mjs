// The producer's `enqueue` against a live prioq and a real Redis: it waits
// while a bounded queue is full (429 `queue_full`) and sends the job once
// a worker made room; it gives up with the refusal when the queue stays
// full; a refusal that retrying cannot change is thrown at once. Needs the
// built client (npm run build) and the prioq binary (PRIOQ_BIN):
//
//   PRIOQ_BIN=target/debug/prioq node --test clients/typescript/test/

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { killAll, startPrioq, startRedis } from '../../../tests/e2e/support.mjs';
import { Rejection, createClient, enqueue } from '../dist/index.js';

let redis;
let prioq;
let client;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis, { env: { PRIOQ_LOG_REQUESTS: 'true' } });
  client = createClient(prioq.base);
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

/** Whether a log line of prioq's is an enqueue answered 429. */
function refused(line) {
  try {
    const { fields } = JSON.parse(line);
    return fields?.status === 429 && fields?.route === '/v1/queues/{queue}/jobs';
  } catch {
    return false;
  }
}

/** A queue bounded at one waiting job, holding one. */
async function fullQueue(queue) {
  const { response } = await client.PATCH('/v1/queues/{queue}/settings', {
    params: { path: { queue } },
    body: { max_pending: 1 },
    headers: { 'Content-Type': 'application/merge-patch+json' },
  });
  assert.equal(response.status, 200);
  await enqueue(client, queue, { task: 't', id: `${queue}-first` });
}

test('an enqueue into a full queue waits until a claim makes room', async () => {
  await fullQueue('full');
  const from = prioq.lines.length;
  let settled = false;
  const waiting = enqueue(client, 'full', { task: 't', id: 'second' }).finally(() => {
    settled = true;
  });
  // Refused once (prioq logged a 429), and backing off.
  await prioq.waitForLine((line) => refused(line), { from });
  assert.equal(settled, false, 'still backing off');
  const { response: absent } = await client.GET('/v1/queues/{queue}/jobs/{id}', {
    params: { path: { queue: 'full', id: 'second' } },
  });
  assert.equal(absent.status, 404, 'not made while the queue is full');
  const { data: claimed } = await client.POST('/v1/queues/{queue}/claim', { params: { path: { queue: 'full' } }, body: {} });
  assert.equal(claimed.jobs[0].id, 'full-first');
  const job = await waiting;
  assert.equal(job.id, 'second');
  assert.equal(job.state, 'pending');
  assert.equal(job.created, true);
});

test('an enqueue gives up with the refusal when the queue stays full', async () => {
  await fullQueue('stays');
  const started = Date.now();
  await assert.rejects(enqueue(client, 'stays', { task: 't', id: 'late' }, { giveUpAfterMs: 1500 }), (error) => {
    assert.ok(error instanceof Rejection, String(error));
    assert.equal(error.status, 429);
    assert.equal(error.code, 'queue_full');
    return true;
  });
  // Retry-After is 1 s: it waited for it, and gave up within its budget.
  const took = Date.now() - started;
  assert.ok(took >= 900 && took < 5000, `${took} ms`);
  const { response } = await client.GET('/v1/queues/{queue}/jobs/{id}', { params: { path: { queue: 'stays', id: 'late' } } });
  assert.equal(response.status, 404);
});

test('a refusal retrying cannot change is thrown at once', async () => {
  await assert.rejects(enqueue(client, 'bad', { task: 't', priority: 999 }), (error) => {
    assert.ok(error instanceof Rejection, String(error));
    assert.equal(error.status, 422);
    assert.equal(error.code, 'validation_failed');
    return true;
  });
});
