// The README's first job and the walk through the API (docs/api-walk.md),
// run as written: every `$ ` command of their console blocks, the
// README's first, then the walk's, in order, in bash with curl, against
// one live prioq (no token) and Redis, with B set to that prioq's address
// and H to the JSON content type.
//
// Each answer is compared with the output the page shows where the
// output says something definite: the HTTP status line, and, in order,
// every `state`, `code`, `status`, `created`, `paused`, `id`,
// `lease_token` and `last_job_id` shown (an output may elide parts with
// `…`; the pairs it shows must appear in that order). Values the server
// makes up (generated ids, lease tokens, schedule run ids) differ from the
// page's: the first time one appears in an output, the value prioq
// answered stands in for it in every later command and output, on either
// page. A value a page sent itself must come back as it is.
//
// A command ending in `&` runs in the background; `$ wait` shows what the
// background commands printed. A command whose comment says `later` is
// repeated (every 250 ms, for up to 20 s) until its answer matches.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { killAll, root, startPrioq, startRedis } from './support.mjs';

/** The keys whose values are compared, in the order an output shows them. */
const COMPARED = ['state', 'code', 'status', 'created', 'paused', 'id', 'lease_token', 'last_job_id', 'traceparent'];
/** The keys whose values prioq may make up. */
const MADE_UP = new Set(['id', 'lease_token', 'last_job_id']);
const REPEAT_MS = 20000;

let redis;
let prioq;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis, { env: { PRIOQ_SWEEP_INTERVAL_MS: '100' } });
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

/** The pages whose console blocks run, in order, with their least number of commands. */
const PAGES = [['README.md', 3], ['docs/api-walk.md', 40]];

/**
 * A page's commands, in order: `{ command, expected, file, line }`, from
 * every console block of the page.
 */
function commands(file) {
  const page = readFileSync(path.join(root, file), 'utf8');
  const steps = [];
  const block = /```console\n([\s\S]*?)```/g;
  for (const match of page.matchAll(block)) {
    // The line of the block's first line inside its fence, counted from 1.
    const firstLine = page.slice(0, match.index).split('\n').length + 1;
    const lines = match[1].split('\n');
    for (let i = 0; i < lines.length; i += 1) {
      if (!lines[i].startsWith('$ ')) continue;
      const line = firstLine + i;
      let command = lines[i].slice(2);
      // A command goes on over the lines it continues with `\` or with a
      // quote still open.
      while (i + 1 < lines.length && (command.endsWith('\\') || quotesOpen(command))) {
        i += 1;
        command += `\n${lines[i]}`;
      }
      const output = [];
      while (i + 1 < lines.length && !lines[i + 1].startsWith('$ ')) {
        i += 1;
        output.push(lines[i]);
      }
      steps.push({ command, expected: output.join('\n').trim(), file, line });
    }
  }
  return steps;
}

function quotesOpen(text) {
  return (text.match(/'/g) ?? []).length % 2 === 1;
}

/** Runs `command` in bash; answers what it printed (stdout and stderr). */
function run(command) {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], {
      env: {
        PATH: process.env.PATH, HOME: process.env.HOME ?? '/tmp', B: prioq.base, H: 'Content-Type: application/json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => { out += chunk; });
    child.stderr.on('data', (chunk) => { out += chunk; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out: out.replace(/\r\n/g, '\n').trim() }));
  });
}

/** The compared `"key":value` pairs of a text, in order. */
function pairs(text) {
  const pattern = new RegExp(`"(${COMPARED.join('|')})":("(?:[^"\\\\]|\\\\.)*"|-?\\d+|true|false|null)`, 'g');
  return [...text.matchAll(pattern)].map(([, key, value]) => [key, value]);
}

/**
 * Compares an answer with the page's output; answers what differs, or
 * null, and learns the made-up values (into `learned` only when it all
 * matches).
 */
function compare(expected, actual, sent, substitutions) {
  const statusLine = (text) => text.match(/^HTTP\/[\d.]+ (\d{3})/m)?.[1];
  if (statusLine(expected) && statusLine(expected) !== statusLine(actual)) {
    return `status ${statusLine(actual)}, not ${statusLine(expected)}`;
  }
  const got = pairs(actual);
  const learned = new Map();
  let at = 0;
  for (const [key, shown] of pairs(expected)) {
    while (at < got.length && got[at][0] !== key) at += 1;
    if (at === got.length) return `no "${key}" answered where the page shows ${shown}`;
    const value = got[at][1];
    at += 1;
    const wanted = substitutions.get(shown) ?? learned.get(shown) ?? shown;
    if (value === wanted) continue;
    // A value no page sent, shown for the first time: prioq's own.
    if (MADE_UP.has(key) && shown !== 'null' && value !== 'null' && !sent.includes(shown.slice(1, -1))
        && !substitutions.has(shown) && !learned.has(shown)) {
      learned.set(shown, value);
      continue;
    }
    return `"${key}":${value}, not ${wanted}`;
  }
  for (const [shown, value] of learned) substitutions.set(shown, value);
  return null;
}

/** `text` with every learned value in place of the page's. */
function substitute(text, substitutions) {
  let out = text;
  for (const [shown, value] of substitutions) out = out.split(shown.slice(1, -1)).join(value.slice(1, -1));
  return out;
}

test("the README's first job and the walk through the API run as written", { timeout: 300000 }, async () => {
  const steps = [];
  for (const [file, least] of PAGES) {
    const found = commands(file);
    assert.ok(found.length >= least, `only ${found.length} commands found in ${file}`);
    steps.push(...found);
  }
  const substitutions = new Map();
  const background = [];
  let sent = '';
  for (const { command, expected, file, line } of steps) {
    const where = `${file} line ${line}: ${command.split('\n')[0]}`;
    const script = substitute(command, substitutions);
    sent += `\n${command}`;
    if (/&\s*(#.*)?$/.test(script)) {
      background.push(run(script.replace(/&\s*(#.*)?$/, '')));
      continue;
    }
    const repeats = /#.*\blater\b/.test(command);
    const deadline = Date.now() + (repeats ? REPEAT_MS : 0);
    for (;;) {
      let actual;
      if (/^wait\b/.test(script.trim())) {
        actual = (await Promise.all(background.splice(0))).map(({ out }) => out).join('\n');
      } else {
        const { code, out } = await run(script);
        assert.equal(code, 0, `${where}\nexited ${code}:\n${out}`);
        actual = out;
      }
      const difference = compare(expected, actual, sent, substitutions);
      if (difference === null) break;
      if (Date.now() > deadline) assert.fail(`${where}\n${difference}\nanswered: ${actual}\nshown:    ${expected}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  assert.equal(background.length, 0, 'a background command was never waited for');
});
