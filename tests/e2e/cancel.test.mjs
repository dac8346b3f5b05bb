// The Python worker helper told of a cancel while the task runs
// (tests/e2e/worker_cancel.py): `report.cancelled` is set, the job ends
// cancelled with the task's result. (The TypeScript helper's abort
// signal: clients/typescript/test/worker.test.mjs.)
//
// Environment: PRIOQ_PYTHON, the Python with clients/python installed.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Proc, killAll, root, startPrioq, startRedis } from './support.mjs';

let redis;
let prioq;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis);
});

after(async () => {
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

test('the Python worker tells its task of a cancel, and the job ends cancelled', async () => {
  const proc = new Proc('python-cancel', process.env.PRIOQ_PYTHON ?? 'python3', [
    path.join(root, 'tests', 'e2e', 'worker_cancel.py'),
  ], { env: { PATH: process.env.PATH, PRIOQ_URL: prioq.base, PRIOQ_QUEUE: 'cancel' } });
  const { code } = await proc.exited;
  assert.equal(code, 0, `worker_cancel.py failed\n${proc.tail(40)}`);
  const line = proc.lines.find((text) => text.startsWith('{'));
  assert.deepEqual(JSON.parse(line), {
    told: [true], state: 'cancelled', reason: 'changed my mind', result: { stopped: true },
  });
});
