// The Python worker helper's consumer spans, exported to memory by
// OpenTelemetry's SDK in the worker (tests/e2e/worker_spans.py prints
// them): a job's first delivery runs in a child of the trace its enqueue
// came with, a later delivery in a new trace linked to it, a job without
// a trace in a root span; and the worker runs jobs all the same without
// OpenTelemetry. (The TypeScript helper's: clients/typescript/test/spans.test.mjs.)
//
// Environment: PRIOQ_PYTHON, the Python with clients/python and
// OpenTelemetry's SDK installed (scripts/e2e-test sets it up).

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Proc, killAll, root, startPrioq, startRedis } from './support.mjs';

let redis;
let prioq;
let serial = 0;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis);
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

/** Runs worker_spans.py on a fresh queue; answers the JSON lines it printed. */
async function spans(...args) {
  const queue = `spans-${++serial}`;
  const proc = new Proc(`python-spans-${serial}`, process.env.PRIOQ_PYTHON ?? 'python3', [
    path.join(root, 'tests', 'e2e', 'worker_spans.py'), ...args,
  ], { env: { PATH: process.env.PATH, PRIOQ_URL: prioq.base, PRIOQ_QUEUE: queue } });
  const { code } = await proc.exited;
  assert.equal(code, 0, `worker_spans.py failed\n${proc.tail(40)}`);
  return proc.lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
}

test('the Python worker runs each job in a consumer span: child on the first delivery, linked after', async () => {
  const all = await spans();
  const of = (id) => all.filter((span) => span.attributes['messaging.message.id'] === id);
  for (const span of all) {
    assert.equal(span.name, `process ${span.attributes['messaging.destination.name']}`);
    assert.match(span.name, /^process spans-\d+$/);
    assert.equal(span.kind, 'CONSUMER');
    assert.equal(span.attributes['messaging.system'], 'prioq');
    assert.equal(span.attributes['messaging.operation.type'], 'process');
  }

  const [first] = of('first');
  assert.equal(of('first').length, 1);
  assert.equal(first.trace_id, '4bf92f3577b34da6a3ce929d0e0e4736', 'in the trace of its enqueue');
  assert.equal(first.parent, '00f067aa0ba902b7', 'a child of the span that enqueued it');
  assert.deepEqual(first.links, []);
  assert.equal(first.status, 'UNSET');

  const retried = of('retried');
  assert.equal(retried.length, 2, JSON.stringify(retried));
  const [failed, again] = retried.sort((a, b) => a.attributes['prioq.job.attempts'] - b.attributes['prioq.job.attempts']);
  assert.equal(failed.trace_id, '0af7651916cd43dd8448eb211c80319c');
  assert.equal(failed.parent, 'b7ad6b7169203331');
  assert.equal(failed.status, 'ERROR', 'the task raised');
  assert.notEqual(again.trace_id, failed.trace_id, 'a later delivery starts a trace of its own');
  assert.equal(again.parent, null);
  assert.deepEqual(again.links, [['0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331']]);
  assert.equal(again.attributes['prioq.job.attempts'], 1);

  const [plain] = of('plain');
  assert.equal(of('plain').length, 1);
  assert.equal(plain.parent, null, 'a job without a trace runs in a root span');
  assert.deepEqual(plain.links, []);
});

test('without OpenTelemetry the Python worker runs its jobs all the same', async () => {
  const [done] = await spans('--without-opentelemetry');
  assert.deepEqual(done, { runs: { plain: 1 } });
});
