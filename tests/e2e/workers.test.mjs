// The example workers in examples/ against a live prioq with a token and a
// real Redis: they work through a queue, keep a long job's lease alive
// and report its progress, ack each job with its result with their next
// claim (one request per job) and nack, handle each error answer, and stop
// cleanly on SIGTERM. And the call-and-wait producer: it enqueues, waits,
// and prints the result or the error.
//
// Environment: PRIOQ_PYTHON, the Python that has clients/python installed
// (default python3).

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  Proc, freePort, killAll, root, startPrioq, startRedis, withTimeout,
} from './support.mjs';

const TOKEN = 'worker-token';
// Short leases and a quick sweeper: a job whose lease is not extended is
// taken back within a fraction of a second.
const LEASE_MS = 3000;
// What "promptly" means for a stop: far below the workers' 10 s long poll.
const PROMPT_MS = 3000;

const WORKERS = {
  python: [process.env.PRIOQ_PYTHON ?? 'python3', [path.join(root, 'examples', 'worker.py')]],
  node: [process.execPath, [path.join(root, 'examples', 'worker.mjs')]],
  shell: ['bash', [path.join(root, 'examples', 'worker.sh')]],
};

let redis;
let prioq;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis, { tokens: [TOKEN], env: { PRIOQ_SWEEP_INTERVAL_MS: '100' } });
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

let runs = 0;

function startWorker(language, env) {
  const [command, args] = WORKERS[language];
  return new Proc(`worker-${language}-${++runs}`, command, args, {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME ?? '/tmp',
      PRIOQ_URL: prioq.base,
      PRIOQ_TOKEN: TOKEN,
      PRIOQ_LEASE_MS: String(LEASE_MS),
      ...env,
    },
  });
}

/**
 * How many requests prioq has answered, by route and status, from the
 * request-duration histogram on /metrics: `counts.get('<route> <status>')`.
 */
async function requestCounts() {
  const { body } = await prioq.api.request('GET', '/metrics');
  const counts = new Map();
  const line = /^prioq_http_request_duration_seconds_count\{route="([^"]*)",status="(\d+)"\} (\d+)$/gm;
  for (const [, route, status, count] of body.matchAll(line)) counts.set(`${route} ${status}`, Number(count));
  return counts;
}

/**
 * Reads a job until `done` holds for it, every 50 ms, at most `ms`;
 * answers the job.
 */
async function untilJob(queue, id, done, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const { status, body } = await prioq.api.job(queue, id);
    if (status === 200 && done(body)) return body;
    if (Date.now() > deadline) throw new Error(`job ${id} never got there: ${status} ${JSON.stringify(body)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Sends SIGTERM and insists on exit status 0 within PROMPT_MS. */
async function stopsCleanly(worker) {
  const started = Date.now();
  const { code, signal } = await worker.stop('SIGTERM', PROMPT_MS);
  assert.equal(signal, null, `${worker.name} was killed by ${signal}\n${worker.tail()}`);
  assert.equal(code, 0, `${worker.name} exited ${code}\n${worker.tail()}`);
  assert.equal(worker.lines.at(-1), 'stopped', worker.tail());
  return Date.now() - started;
}

for (const language of Object.keys(WORKERS)) {
  describe(`the ${language} worker`, () => {
    test('acks what succeeds, nacks what fails, keeps a long job leased, finishes its job on SIGTERM', async () => {
      const queue = `work-${language}`;
      const { api } = prioq;
      await api.enqueue(queue, { id: 'ok-1', task: 'echo', args: { n: 1 }, priority: 0 });
      // Outlives its first lease: only heartbeats keep it this worker's.
      await api.enqueue(queue, { id: 'slow-1', task: 'sleep', args: { ms: LEASE_MS + 1000 }, priority: 1 });
      await api.enqueue(queue, { id: 'fail-1', task: 'fail', max_attempts: 1, priority: 2 });
      await api.enqueue(queue, { id: 'ok-2', task: 'echo', args: { n: 2 }, priority: 3 });

      const worker = startWorker(language, { PRIOQ_QUEUE: queue, PRIOQ_WORKER: `test-${language}` });
      await worker.waitForLine(new RegExp(`^worker test-${language} polling ${queue}$`));
      for (const id of ['ok-1', 'slow-1']) await worker.waitForLine(new RegExp(`^acked ${id}$`));
      await worker.waitForLine(/^nacked fail-1: .*task 'fail' always fails$/);
      await worker.waitForLine(/^acked ok-2$/);
      assert.deepEqual(worker.lines.filter((line) => /lease lost|dropped|failed/.test(line)), []);

      for (const id of ['ok-1', 'slow-1', 'ok-2']) {
        assert.equal((await api.job(queue, id)).status, 404, `${id} was acked`);
      }
      const failed = await api.job(queue, 'fail-1');
      assert.equal(failed.body.state, 'dead');
      assert.equal(failed.body.attempts, 1);
      assert.match(failed.body.last_error, /task 'fail' always fails/);
      const stats = await api.stats(queue);
      assert.deepEqual(
        [stats.pending, stats.scheduled, stats.processing, stats.dead],
        [0, 0, 0, 1],
      );

      // SIGTERM in the middle of a job: the job is finished and acked,
      // and the worker claims nothing more.
      await api.enqueue(queue, { id: 'slow-2', task: 'sleep', args: { ms: 800 } });
      await worker.waitForLine(/^claimed slow-2 \(sleep\)$/);
      await api.enqueue(queue, { id: 'left-1', task: 'echo' });
      await stopsCleanly(worker);
      assert.ok(worker.lines.includes('acked slow-2'), worker.tail());
      assert.equal((await api.job(queue, 'slow-2')).status, 404);
      const left = await api.job(queue, 'left-1');
      assert.equal(left.body.state, 'pending', 'a stopping worker claims nothing more');
    });

    test('acks each job with its next claim: one request per job', async () => {
      const queue = `steady-${language}`;
      const { api } = prioq;
      const worker = startWorker(language, { PRIOQ_QUEUE: queue });
      await worker.waitForLine(/ polling /);
      const before = await requestCounts();
      const ids = ['quick-1', 'quick-2', 'quick-3', 'quick-4', 'quick-5'];
      const jobs = ids.map((id) => ({ id, task: 'echo', args: { id } }));
      await api.expect(200, 'POST', `/v1/queues/${queue}/jobs/batch`, { jobs });
      for (const id of ids) await worker.waitForLine(new RegExp(`^acked ${id}$`));
      const counts = await requestCounts();
      const since = (key) => (counts.get(key) ?? 0) - (before.get(key) ?? 0);

      const claims = since('/v1/queues/{queue}/claim 200');
      assert.ok(claims >= ids.length, `${claims} claims for ${ids.length} jobs`);
      const singleAck = '/v1/queues/{queue}/jobs/{id}/ack 204';
      assert.equal(since(singleAck), 0, 'no job was acked on its own');
      // The long poll that got the first job, then one claim per job that
      // carries its ack (and gets the next job): jobs + 1 requests, no more.
      const asked = [...counts.keys()].filter((key) => /\/(claim|ack|extend|nack) /.test(key));
      const requests = asked.reduce((sum, key) => sum + since(key), 0);
      assert.ok(requests <= ids.length + 1, `${requests} requests for ${ids.length} jobs`);
      assert.deepEqual(worker.lines.filter((line) => /lease lost|dropped|failed/.test(line)), []);
      for (const id of ids) {
        assert.equal((await api.job(queue, id)).status, 404, `${id} was acked`);
      }
      await stopsCleanly(worker);
    });

    test('reports progress on a long job and acks each job with its result', async () => {
      const queue = `results-${language}`;
      const { api } = prioq;
      await api.configure(queue, { retain_ms: 600000 });
      const worker = startWorker(language, { PRIOQ_QUEUE: queue });
      await worker.waitForLine(/ polling /);
      await api.enqueue(queue, { id: 'long-1', task: 'sleep', args: { ms: 3000 } });
      // A report reaches prioq with a heartbeat while the job still runs.
      const running = await untilJob(queue, 'long-1', (job) => job.progress !== null);
      assert.equal(running.state, 'processing', JSON.stringify(running));
      assert.equal(running.progress.of_ms, 3000);
      assert.ok(running.progress.slept_ms < 3000, JSON.stringify(running.progress));
      await api.enqueue(queue, { id: 'echo-1', task: 'echo', args: { n: 7 } });
      for (const id of ['long-1', 'echo-1']) await worker.waitForLine(new RegExp(`^acked ${id}$`));
      const long = (await api.job(queue, 'long-1')).body;
      assert.equal(long.state, 'completed', JSON.stringify(long));
      assert.deepEqual(long.result, { slept_ms: 3000 });
      assert.equal(long.progress, null, 'progress ends with the job');
      const echoed = (await api.job(queue, 'echo-1')).body;
      assert.deepEqual([echoed.state, echoed.result], ['completed', { n: 7 }]);
      await stopsCleanly(worker);
    });

    test('a job whose worker is killed mid-task goes to the next worker once its lease ends', async () => {
      const queue = `crash-${language}`;
      const { api } = prioq;
      await api.enqueue(queue, { id: 'crash-1', task: 'sleep', args: { ms: 1500 } });
      const first = startWorker(language, { PRIOQ_QUEUE: queue, PRIOQ_WORKER: `doomed-${language}` });
      await first.waitForLine(/^claimed crash-1 \(sleep\)$/);
      const killed = await first.stop('SIGKILL', PROMPT_MS);
      assert.equal(killed.signal, 'SIGKILL', first.tail());
      const held = (await api.job(queue, 'crash-1')).body;
      assert.deepEqual([held.state, held.worker], ['processing', `doomed-${language}`], JSON.stringify(held));

      const second = startWorker(language, { PRIOQ_QUEUE: queue, PRIOQ_WORKER: `heir-${language}` });
      await second.waitForLine(/^claimed crash-1 \(sleep\)$/, { ms: LEASE_MS + 10000 });
      // Only once the first lease ran out: the sweeper counted the lost attempt.
      const taken = (await api.job(queue, 'crash-1')).body;
      assert.equal(taken.worker, `heir-${language}`, JSON.stringify(taken));
      assert.equal(taken.attempts, 1, JSON.stringify(taken));
      await second.waitForLine(/^acked crash-1$/);
      assert.equal((await api.job(queue, 'crash-1')).status, 404, 'crash-1 was acked');
      await stopsCleanly(second);
      assert.equal(second.lines.filter((line) => line === 'acked crash-1').length, 1, second.tail());
    });

    test('stops at once on SIGTERM while it waits for work', async () => {
      const queue = `idle-${language}`;
      const worker = startWorker(language, { PRIOQ_QUEUE: queue });
      await worker.waitForLine(/ polling /);
      // A job done shows the worker is past its start and back in a long poll.
      await prioq.api.enqueue(queue, { id: 'ping', task: 'echo' });
      await worker.waitForLine(/^acked ping$/);
      const took = await stopsCleanly(worker);
      assert.ok(took < PROMPT_MS, `took ${took} ms`);
    });

    test('exits with a message when its token is refused', async () => {
      const worker = startWorker(language, { PRIOQ_QUEUE: 'refused', PRIOQ_TOKEN: 'wrong-token' });
      const { code } = await withTimeout(worker.exited, 10000, `${worker.name} did not exit on a 401`);
      assert.equal(code, 1, worker.tail());
      assert.ok(worker.lines.some((line) => /refused the token .*401 unauthorized/.test(line)), worker.tail());
    });

    test('backs off while prioq cannot be reached, and still stops on SIGTERM', async () => {
      const nowhere = await freePort();
      const worker = startWorker(language, { PRIOQ_QUEUE: 'q', PRIOQ_URL: `http://127.0.0.1:${nowhere}` });
      const backOffs = () => worker.lines.filter((line) => /^backing off [\d.]+ s: /.test(line)).length;
      await worker.waitForLine(() => backOffs() >= 2);
      await stopsCleanly(worker);
    });

    test('retries while Redis is down (503) and works once it is back', async () => {
      const port = await freePort();
      const stranded = await startPrioq({ url: `redis://127.0.0.1:${port}` }, { tokens: [TOKEN] });
      const worker = startWorker(language, { PRIOQ_QUEUE: 'later', PRIOQ_URL: stranded.base });
      try {
        await worker.waitForLine(/^backing off [\d.]+ s: 503 backend_unavailable/);
        const late = await startRedis({ port });
        try {
          await stranded.api.enqueue('later', { id: 'late-1', task: 'echo' });
          await worker.waitForLine(/^acked late-1$/, { ms: 20000 });
          await stopsCleanly(worker);
        } finally {
          await late.stop();
        }
      } finally {
        await worker.stop('SIGKILL');
        await stranded.stop();
      }
    });
  });
}

describe('the call-and-wait producer', () => {
  const produce = (queue, id) => new Proc(`call-${id}`, process.env.PRIOQ_PYTHON ?? 'python3', [
    path.join(root, 'examples', 'call_and_wait.py'), queue, 'render', '{"page": 1}', id,
  ], {
    env: { PATH: process.env.PATH, PRIOQ_URL: prioq.base, PRIOQ_TOKEN: TOKEN, PRIOQ_TIMEOUT_S: '30' },
  });

  /** Claims the job `id` once the producer has enqueued it. */
  async function claimed(queue, id) {
    await untilJob(queue, id, (job) => job.state === 'pending');
    const [job] = await prioq.api.claim(queue, 'test');
    assert.equal(job?.id, id);
    return job;
  }

  test('prints the result once a worker acks, whichever request it waits in', async () => {
    const queue = 'calls';
    const producer = produce(queue, 'call-1');
    const job = await claimed(queue, 'call-1');
    assert.equal(job.args.page, 1);
    await prioq.api.expect(204, 'POST', `/v1/queues/${queue}/jobs/call-1/ack`, {
      lease_token: job.lease_token, result: { pages: ['p1.pdf'] },
    });
    const { code } = await withTimeout(producer.exited, 10000, 'the producer did not finish');
    assert.equal(code, 0, producer.tail());
    assert.deepEqual(JSON.parse(producer.lines.at(-1)), { pages: ['p1.pdf'] });
    // Run again with the same id: the kept job answers, no second job.
    const again = produce(queue, 'call-1');
    assert.equal((await withTimeout(again.exited, 10000, 'the second run did not finish')).code, 0, again.tail());
    assert.ok(again.lines.includes('found call-1'), again.tail());
    const stats = await prioq.api.stats(queue);
    assert.deepEqual([stats.pending, stats.processing, stats.completed], [0, 0, 1]);
  });

  test('prints the error and exits 1 when the job dies', async () => {
    const queue = 'calls-dying';
    const producer = produce(queue, 'call-2');
    const job = await claimed(queue, 'call-2');
    await prioq.api.expect(200, 'POST', `/v1/queues/${queue}/jobs/call-2/nack`, {
      lease_token: job.lease_token, error: 'renderer crashed', dead: true,
    });
    const { code } = await withTimeout(producer.exited, 10000, 'the producer did not finish');
    assert.equal(code, 1, producer.tail());
    assert.ok(producer.lines.some((line) => /call-2 died: renderer crashed/.test(line)), producer.tail());
  });

  test('waits while the queue is full, then enqueues once a worker makes room', async () => {
    const queue = 'calls-full';
    await prioq.api.configure(queue, { max_pending: 1 });
    await prioq.api.expect(201, 'POST', `/v1/queues/${queue}/jobs`, { task: 'render', id: 'filler' });
    const route = '/v1/queues/{queue}/jobs 429';
    const before = (await requestCounts()).get(route) ?? 0;
    const producer = produce(queue, 'call-3');
    // Refused (429 queue_full), and backing off: nothing enqueued yet.
    const deadline = Date.now() + 10000;
    while (((await requestCounts()).get(route) ?? 0) === before) {
      assert.ok(Date.now() < deadline, `no 429 answered\n${producer.tail()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal((await prioq.api.job(queue, 'call-3')).status, 404);
    assert.ok(!producer.lines.some((line) => line.includes('enqueued')), producer.tail());
    const [filler] = await prioq.api.claim(queue, 'test');
    assert.equal(filler?.id, 'filler');
    const job = await claimed(queue, 'call-3');
    await prioq.api.expect(204, 'POST', `/v1/queues/${queue}/jobs/call-3/ack`, {
      lease_token: job.lease_token, result: { pages: 3 },
    });
    const { code } = await withTimeout(producer.exited, 10000, 'the producer did not finish');
    assert.equal(code, 0, producer.tail());
    assert.ok(producer.lines.includes('enqueued call-3'), producer.tail());
    assert.deepEqual(JSON.parse(producer.lines.at(-1)), { pages: 3 });
  });
});
