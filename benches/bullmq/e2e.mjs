// BullMQ end to end, as `cargo bench --bench load` runs it next to prioq:
// producers add single jobs as the worker completes them (a small, bounded
// backlog, like prioq's end-to-end loop), and one Worker whose processor
// returns at once completes them.
//
//   node e2e.mjs [redis-url] [--variant priority|fifo|mix] [--concurrency 64]
//                [--producers 32] [--duration 4] [--warmup 1]
//
// Each flag can also come from the environment: REDIS_URL, VARIANT,
// CONCURRENCY, PRODUCERS, DURATION, WARMUP (seconds). `priority` gives every
// job priority 1 (BullMQ's prioritized path, like prioq, which always orders
// by priority); `fifo` gives none (BullMQ's plain wait list); `mix` spreads
// the jobs evenly over ten priorities, 1 to 10 (the realistic mix).
//
// Prints {"event":"measuring"} when the measured window opens and
// {"event":"measured"} when it closes, so the caller can read Redis's
// counters at the same moments, then one JSON line of results.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const PAYLOAD_BYTES = 200;
const QUEUE = 'bench';

function options() {
  const argv = process.argv.slice(2);
  const flag = (name, fallback) => {
    const at = argv.indexOf(`--${name}`);
    if (at >= 0 && at + 1 < argv.length) return argv[at + 1];
    return process.env[name.toUpperCase()] ?? fallback;
  };
  const positional = argv.find((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
  const concurrency = Number(flag('concurrency', 64));
  const o = {
    url: positional ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    variant: flag('variant', 'priority'),
    concurrency,
    producers: Number(flag('producers', Math.max(1, concurrency >> 1))),
    duration: Number(flag('duration', 4)),
    warmup: Number(flag('warmup', 1)),
  };
  if (!['priority', 'fifo', 'mix'].includes(o.variant)) throw new Error(`unknown variant ${o.variant}`);
  for (const k of ['concurrency', 'producers', 'duration', 'warmup']) {
    if (!(o[k] >= 0) || (k !== 'warmup' && o[k] === 0)) throw new Error(`bad ${k}: ${o[k]}`);
  }
  return o;
}

// The same 200 bytes of JSON as prioq's jobs carry: {"blob":"xxx…"}.
function payload() {
  const data = { blob: 'x'.repeat(PAYLOAD_BYTES - '{"blob":""}'.length) };
  if (JSON.stringify(data).length !== PAYLOAD_BYTES) throw new Error('payload size');
  return data;
}

// Lets a producer add a job only when the backlog (added, not yet finished)
// is under its bound, so producers add as the worker finishes jobs.
class Credits {
  constructor(n) {
    this.n = n;
    this.waiting = [];
  }
  take() {
    if (this.n > 0) {
      this.n -= 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  give() {
    const next = this.waiting.shift();
    if (next) next(true);
    else this.n += 1;
  }
  cancel() {
    for (const resolve of this.waiting.splice(0)) resolve(false);
  }
}

function quantiles(samples) {
  if (samples.length === 0) return { n: 0, p50_ms: 0, p99_ms: 0, max_ms: 0 };
  samples.sort((a, b) => a - b);
  const rank = (p) => samples[Math.min(samples.length, Math.max(1, Math.ceil(p * samples.length))) - 1];
  const round = (x) => Math.round(x * 1000) / 1000;
  return {
    n: samples.length,
    p50_ms: round(rank(0.5)),
    p99_ms: round(rank(0.99)),
    max_ms: round(samples[samples.length - 1]),
  };
}

function bullmqVersion() {
  const path = new URL('./node_modules/bullmq/package.json', import.meta.url);
  return JSON.parse(readFileSync(path, 'utf8')).version;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const o = options();
  const data = payload();
  const jobOptions = { removeOnComplete: true, removeOnFail: true };
  if (o.variant === 'priority') jobOptions.priority = 1;

  // ESM cannot let BullMQ load ioredis itself: it is given instances.
  const connection = (name) => new IORedis(o.url, { maxRetriesPerRequest: null, connectionName: name });
  const queue = new Queue(QUEUE, { connection: connection('bench-queue') });
  await queue.obliterate({ force: true });

  let measuring = false;
  let completed = 0;
  let failed = 0;
  const addLatency = [];
  const pickupLatency = [];
  const credits = new Credits(2 * o.concurrency);

  const worker = new Worker(
    QUEUE,
    async (job) => {
      // Milliseconds from the add to the processor (job.timestamp has ms resolution).
      if (measuring) pickupLatency.push(Date.now() - job.timestamp);
    },
    { connection: connection('bench-worker'), concurrency: o.concurrency },
  );
  worker.on('completed', () => {
    completed += 1;
    credits.give();
  });
  worker.on('failed', () => {
    failed += 1;
    credits.give();
  });
  worker.on('error', (error) => process.stderr.write(`worker: ${error}\n`));
  await worker.waitUntilReady();

  let running = true;
  let added = 0;
  const producer = async () => {
    while (running && (await credits.take())) {
      const start = performance.now();
      const options = o.variant === 'mix' ? { ...jobOptions, priority: 1 + (added % 10) } : jobOptions;
      await queue.add('bench', data, options);
      if (measuring) addLatency.push(performance.now() - start);
      added += 1;
    }
  };
  const producers = Array.from({ length: o.producers }, producer);

  await sleep(o.warmup * 1000);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const completed0 = completed;
  measuring = true;
  console.log(JSON.stringify({ event: 'measuring' }));
  await sleep(o.duration * 1000);
  const t1 = performance.now();
  const completed1 = completed;
  const cpu = process.cpuUsage(cpu0);
  measuring = false;
  console.log(JSON.stringify({ event: 'measured' }));

  running = false;
  credits.cancel();
  // A stuck close must not hold the bench up.
  setTimeout(() => process.exit(3), 15000).unref();
  await Promise.all(producers);
  await worker.close();
  await queue.close();

  const seconds = (t1 - t0) / 1000;
  const jobs = completed1 - completed0;
  console.log(
    JSON.stringify({
      bullmq: bullmqVersion(),
      node: process.version,
      variant: o.variant,
      concurrency: o.concurrency,
      producers: o.producers,
      backlog_bound: 2 * o.concurrency,
      seconds,
      completed: jobs,
      jobs_per_s: jobs / seconds,
      added,
      failed,
      node_cpu_s: (cpu.user + cpu.system) / 1e6,
      node_cpu_user_s: cpu.user / 1e6,
      node_cpu_system_s: cpu.system / 1e6,
      latency: { add: quantiles(addLatency), pickup: quantiles(pickupLatency) },
    }),
  );
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
