// The worker helper's consumer spans, with OpenTelemetry's SDK exporting to
// memory in this process, against a live prioq and a real Redis: a job's
// first delivery runs in a child of the trace its enqueue came with, a
// later delivery in a new trace linked to it, a job without a trace in a
// root span; the span is active while the task runs. Needs the built
// client and PRIOQ_BIN, as test/worker.test.mjs.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

import { killAll, startPrioq, startRedis } from '../../../tests/e2e/support.mjs';
import { Worker, createClient } from '../dist/index.js';

const FIRST = ['4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7'];
const RETRIED = ['0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'];

let redis;
let prioq;
const exporter = new InMemorySpanExporter();

before(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  redis = await startRedis();
  prioq = await startPrioq(redis);
});

after(async () => {
  trace.disable();
  context.disable();
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

async function enqueue(queue, job, traceId, spanId) {
  const headers = { 'Content-Type': 'application/json' };
  if (traceId) headers.traceparent = `00-${traceId}-${spanId}-01`;
  const response = await fetch(`${prioq.base}/v1/queues/${queue}/jobs`, {
    method: 'POST', headers, body: JSON.stringify(job),
  });
  assert.equal(response.status, 201, await response.text());
}

test('each job runs in a consumer span: a child on the first delivery, linked after, active in the task', async () => {
  const queue = 'spans';
  await enqueue(queue, { id: 'first', task: 'work' }, ...FIRST);
  await enqueue(queue, { id: 'retried', task: 'work' }, ...RETRIED);
  await enqueue(queue, { id: 'plain', task: 'work' });
  const runs = new Map();
  let worker;
  const tasks = {
    work: async (args, report, job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      trace.getTracer('test').startActiveSpan(`inside ${job.id}`, (span) => span.end());
      if (job.id === 'retried' && runs.get(job.id) === 1) throw new Error('fails on its first run');
      return job.id;
    },
  };
  worker = new Worker({
    client: createClient(`${prioq.base}/`),
    queue,
    leaseMs: 5000,
    waitMs: 500,
    tasks,
    onEvent: (event) => {
      if (event.type === 'acked' && event.id === 'retried') worker.stop();
    },
  });
  await worker.run();

  const spans = exporter.getFinishedSpans();
  const processing = (id) => spans
    .filter((span) => span.name === `process ${queue}` && span.attributes['messaging.message.id'] === id)
    .sort((a, b) => a.attributes['prioq.job.attempts'] - b.attributes['prioq.job.attempts']);
  const parentOf = (span) => span.parentSpanContext?.spanId;
  for (const span of spans.filter((s) => s.name.startsWith('process'))) {
    assert.equal(span.kind, 4 /* SpanKind.CONSUMER */);
    assert.equal(span.attributes['messaging.system'], 'prioq');
    assert.equal(span.attributes['messaging.operation.type'], 'process');
    assert.equal(span.attributes['messaging.destination.name'], queue);
  }

  const [first] = processing('first');
  assert.deepEqual([first.spanContext().traceId, parentOf(first)], FIRST, 'a child of the enqueue');
  assert.deepEqual(first.links, []);
  const inside = spans.find((span) => span.name === 'inside first');
  assert.equal(parentOf(inside), first.spanContext().spanId, "the task's own spans are children");

  const [failed, again] = processing('retried');
  assert.deepEqual([failed.spanContext().traceId, parentOf(failed)], RETRIED);
  assert.equal(failed.status.code, 2 /* SpanStatusCode.ERROR */);
  assert.notEqual(again.spanContext().traceId, RETRIED[0], 'a later delivery starts a trace of its own');
  assert.equal(parentOf(again), undefined);
  assert.deepEqual(again.links.map((link) => [link.context.traceId, link.context.spanId]), [RETRIED]);

  const [plain] = processing('plain');
  assert.equal(parentOf(plain), undefined, 'a job without a trace runs in a root span');
  assert.notEqual(plain.spanContext().traceId, FIRST[0]);
  assert.deepEqual(plain.links, []);
});
