// Test support: redis-server and prioq processes on loopback ports, a small
// client of the /v1 API, headless Chromium through playwright-core, and
// where screenshots and logs go.
//
// Environment (scripts/e2e-test sets these):
//   PRIOQ_BIN                  the prioq binary (default: target/debug/prioq)
//   PRIOQ_E2E_ARTIFACTS        folder for screenshots and process logs (default: a new temp folder)
//   PRIOQ_UPDATE_SCREENSHOTS   1: also write the dashboard page's screenshots into docs/screenshots/
//   CHROMIUM                   the browser (default /usr/bin/chromium)

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export const prioqBin = process.env.PRIOQ_BIN
  ?? path.join(process.env.CARGO_TARGET_DIR ?? path.join(root, 'target'), 'debug', 'prioq');

export const artifacts = process.env.PRIOQ_E2E_ARTIFACTS
  ?? mkdtempSync(path.join(tmpdir(), 'prioq-e2e-'));
mkdirSync(artifacts, { recursive: true });

const running = new Set();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Kills every process still running, so a failed test leaves none behind. */
export async function killAll() {
  await Promise.all([...procs].map((proc) => proc.stop('SIGKILL')));
}

const procs = new Set();

/**
 * A child process whose output lines are kept, written to a log file in
 * the artifacts folder, and can be awaited.
 */
export class Proc {
  constructor(name, command, args, options = {}) {
    this.name = name;
    this.lines = [];
    this.waiters = new Set();
    this.child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    running.add(this.child);
    procs.add(this);
    const log = createWriteStream(path.join(artifacts, `${name}.log`));
    for (const stream of [this.child.stdout, this.child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        log.write(`${line}\n`);
        this.lines.push(line);
        for (const waiter of this.waiters) waiter.check(line);
      });
    }
    // 'exit', not 'close': a grandchild may hold the pipes open.
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        running.delete(this.child);
        procs.delete(this);
        for (const waiter of this.waiters) {
          waiter.reject(new Error(`${name} exited (${code ?? signal}) before printing a line like ${waiter.what}\n${this.tail()}`));
        }
        resolve({ code, signal });
      });
    });
    this.child.once('error', (error) => {
      for (const waiter of this.waiters) waiter.reject(error);
    });
  }

  get pid() {
    return this.child.pid;
  }

  get running() {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  tail(count = 15) {
    return this.lines.slice(-count).map((line) => `  ${this.name}| ${line}`).join('\n');
  }

  /**
   * Resolves with the first line, from `from` on, for which `match` (a
   * RegExp or a function) holds; rejects after `ms` or when the process
   * exits first.
   */
  waitForLine(match, { ms = 10000, from = 0 } = {}) {
    const test = typeof match === 'function' ? match : (line) => match.test(line);
    const found = this.lines.slice(from).find(test);
    if (found !== undefined) return Promise.resolve(found);
    if (!this.running) {
      return Promise.reject(new Error(`${this.name} has exited; no line like ${match}\n${this.tail()}`));
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        what: String(match),
        check: (line) => {
          if (test(line)) finish(() => resolve(line));
        },
        reject: (error) => finish(() => reject(error)),
      };
      const timer = setTimeout(() => {
        waiter.reject(new Error(`${this.name} printed no line like ${match} within ${ms} ms\n${this.tail()}`));
      }, ms);
      const finish = (settle) => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        settle();
      };
      this.waiters.add(waiter);
    });
  }

  /** Sends `signal` and resolves with the exit, or rejects after `ms`. */
  async stop(signal = 'SIGTERM', ms = 10000) {
    if (this.running) this.child.kill(signal);
    return withTimeout(this.exited, ms, `${this.name} did not exit within ${ms} ms of ${signal}`);
  }
}

export async function withTimeout(promise, ms, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A TCP port nothing listens on now. */
export async function freePort() {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

let serial = 0;

/**
 * A redis-server on a free loopback port (or on `port`, to bring one back),
 * keeping nothing on disk.
 */
export async function startRedis({ port: wanted } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'prioq-e2e-redis-'));
  for (let attempt = 1; ; attempt += 1) {
    const port = wanted ?? await freePort();
    const redis = new Proc(`redis-${++serial}`, 'redis-server', [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir,
    ]);
    try {
      await redis.waitForLine(/Ready to accept connections/);
      redis.port = port;
      redis.url = `redis://127.0.0.1:${port}`;
      redis.exited.then(() => rmSync(dir, { recursive: true, force: true }));
      return redis;
    } catch (error) {
      // Someone took the port in between: try another.
      await redis.stop('SIGKILL');
      if (attempt === 3 || wanted) throw error;
    }
  }
}

/**
 * prioq on a port of its own choosing (it listens on port 0 and logs the
 * address), against `redis`, with a key prefix of its own.
 */
export async function startPrioq(redis, { tokens, env = {} } = {}) {
  const childEnv = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('PRIOQ_')),
  );
  Object.assign(childEnv, {
    PRIOQ_LISTEN: '127.0.0.1:0',
    PRIOQ_REDIS_URL: redis.url,
    PRIOQ_KEY_PREFIX: `e2e-${process.pid}-${++serial}-${Date.now()}`,
    PRIOQ_LOG_FORMAT: 'json',
    PRIOQ_BULK_FLOOR: '0',
    PRIOQ_REDIS_TIMEOUT_MS: '1000',
    RUST_LOG: 'info',
    ...(tokens ? { PRIOQ_API_TOKENS: tokens.join(',') } : {}),
    ...env,
  });
  const prioq = new Proc(`prioq-${++serial}`, prioqBin, [], { env: childEnv });
  const line = await prioq.waitForLine((text) => parse(text)?.fields?.message === 'prioq listening', { ms: 30000 });
  prioq.base = `http://${parse(line).fields.address}`;
  prioq.api = new Api(prioq.base, tokens?.[0]);
  return prioq;
}

function parse(line) {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** A client of the /v1 API: each call answers { status, body, headers }. */
export class Api {
  constructor(base, token) {
    this.base = base;
    this.token = token;
  }

  async request(method, route, body, contentType = 'application/json') {
    const headers = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = contentType;
    const response = await fetch(this.base + route, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15000),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? parse(text) ?? text : null };
  }

  /** Like request, but the status must be `expected`; answers the body. */
  async expect(expected, method, route, body) {
    const answer = await this.request(method, route, body);
    if (answer.status !== expected) {
      throw new Error(`${method} ${route}: expected ${expected}, got ${answer.status} ${JSON.stringify(answer.body)}`);
    }
    return answer.body;
  }

  enqueue(queue, job) {
    return this.expect(201, 'POST', `/v1/queues/${queue}/jobs`, job);
  }

  async claim(queue, worker, extra = {}) {
    const { jobs } = await this.expect(200, 'POST', `/v1/queues/${queue}/claim`, { worker, ...extra });
    return jobs;
  }

  /** Enqueues a job that dies at once: claimed and nacked with `error`. */
  async kill(queue, id, error, extra = {}) {
    await this.enqueue(queue, { id, task: 'send_email', max_attempts: 1, priority: 0, ...extra });
    const [job] = await this.claim(queue, 'seeder');
    if (job?.id !== id) throw new Error(`expected to claim ${id}, got ${JSON.stringify(job)}`);
    return this.expect(200, 'POST', `/v1/queues/${queue}/jobs/${id}/nack`, {
      lease_token: job.lease_token,
      error,
    });
  }

  job(queue, id) {
    return this.request('GET', `/v1/queues/${queue}/jobs/${id}`);
  }

  stats(queue) {
    return this.expect(200, 'GET', `/v1/queues/${queue}`);
  }

  settings(queue) {
    return this.expect(200, 'GET', `/v1/queues/${queue}/settings`);
  }

  /** Changes a queue's settings by a JSON merge patch; answers them. */
  async configure(queue, patch) {
    const answer = await this.request('PATCH', `/v1/queues/${queue}/settings`, patch, 'application/merge-patch+json');
    if (answer.status !== 200) {
      throw new Error(`PATCH /v1/queues/${queue}/settings: expected 200, got ${answer.status} ${JSON.stringify(answer.body)}`);
    }
    return answer.body;
  }

  /** Sets a queue's push target; answers it (with its secret). */
  push(queue, target) {
    return this.request('PUT', `/v1/queues/${queue}/push`, target).then((answer) => {
      if (answer.status !== 201 && answer.status !== 200) {
        throw new Error(`PUT /v1/queues/${queue}/push: got ${answer.status} ${JSON.stringify(answer.body)}`);
      }
      return answer.body;
    });
  }

  groups(queue, query = '') {
    return this.expect(200, 'GET', `/v1/queues/${queue}/groups${query}`);
  }
}

/**
 * Headless Debian Chromium driven by playwright-core, in a fresh profile
 * folder. npm cannot bring a browser here: playwright-core uses the one
 * scripts/e2e-test installs.
 */
export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(path.join(tmpdir(), 'prioq-e2e-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    viewport: { width: 1280, height: 800 },
    timeout: 60000,
  });
  context.setDefaultTimeout(10000);
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * A new tab that records what the page logs as an error and every
 * uncaught exception, so a test can insist there were none.
 */
export async function openPage(browser, viewport) {
  const page = await browser.context.newPage();
  if (viewport) await page.setViewportSize(viewport);
  page.problems = [];
  page.on('console', (message) => {
    if (message.type() === 'error') page.problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => page.problems.push(`uncaught: ${error.message}`));
  return page;
}

/** Saves a screenshot into the artifacts folder and, when asked, docs/screenshots/. */
export async function screenshot(page, name, { fullPage = true } = {}) {
  const file = path.join(artifacts, 'screenshots', `${name}.png`);
  mkdirSync(path.dirname(file), { recursive: true });
  await page.screenshot({ path: file, fullPage, animations: 'disabled' });
  if (process.env.PRIOQ_UPDATE_SCREENSHOTS === '1') {
    const committed = path.join(root, 'docs', 'screenshots', `${name}.png`);
    mkdirSync(path.dirname(committed), { recursive: true });
    copyFileSync(file, committed);
  }
  return file;
}

/**
 * Waits until the element at `locator` has exactly the text `expected`
 * (a string, or a RegExp to match); fails with the text it has.
 */
export async function expectText(locator, expected, ms = 10000) {
  const pattern = expected instanceof RegExp ? expected : new RegExp(`^\\s*${escape(expected)}\\s*$`);
  try {
    await locator.filter({ hasText: pattern }).first().waitFor({ timeout: ms });
  } catch {
    const actual = await locator.allTextContents().catch(() => []);
    throw new Error(`expected ${locator} to have text ${pattern}, it has ${JSON.stringify(actual)}`);
  }
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
