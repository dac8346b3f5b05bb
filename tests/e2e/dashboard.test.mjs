// The dashboard at /ui in headless Chromium, against live prioq instances
// and real Redis servers, with state seeded through the API.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  expectText, killAll, launchBrowser, openPage, screenshot, startPrioq, startRedis,
} from './support.mjs';

const PHONE = { width: 390, height: 844 };
// Samples every second instead of every 3 s, so trends fill quickly.
const UI = '/ui?refresh=1000';

let redis;
let prioq;
let browser;
let processing;

before(async () => {
  redis = await startRedis();
  prioq = await startPrioq(redis);
  browser = await launchBrowser();
  const { api } = prioq;
  // emails: 2 dead, 1 processing, 6 pending over priorities 0, 5, 9, 1 scheduled.
  await api.kill('emails', 'bounce-1', 'SMTP 550: mailbox unavailable');
  await api.kill('emails', 'bounce-2', 'template "welcome" not found');
  await api.enqueue('emails', {
    id: 'welcome-1', task: 'send_email', args: { to: 'a@example.com' }, priority: 0, expires_in_ms: 1800000,
    dedup: { key: 'welcome:user-42' }, backoff: { type: 'exponential', delay_ms: 5000 },
  });
  [processing] = await api.claim('emails', 'mailer-7', { lease_ms: 600000 });
  assert.equal(processing.id, 'welcome-1');
  for (const [id, priority] of [['pw-1', 0], ['pw-2', 0], ['inv-1', 5], ['dig-1', 9], ['dig-2', 9], ['dig-3', 9]]) {
    await api.enqueue('emails', { id, task: 'send_email', priority });
  }
  await api.enqueue('emails', { id: 'later-1', task: 'send_email', delay_ms: 3600000 });
  // reports: 3 pending bulk jobs.
  for (const id of ['r-1', 'r-2', 'r-3']) await api.enqueue('reports', { id, task: 'render', priority: 9 });
  // tenants: groups acme (4 pending), beta (2 pending, weight 3) and gamma
  // (1 pending, 1 processing), one job of no group; a rate limit and a
  // per-group cap.
  await api.configure('tenants', { group_weights: { beta: 3 } });
  await api.configure('tenants', {
    rate_limit: { per_second: 50, burst: 50 }, group_max_in_flight: 10,
    group_rate_limit: { per_second: 5, burst: 5 },
  });
  for (const id of ['g-1', 'g-2']) await api.enqueue('tenants', { id, task: 'sync', group: 'gamma', priority: 0 });
  const [fair] = await api.claim('tenants', 'syncer-3', { lease_ms: 600000 });
  assert.equal(fair.group, 'gamma');
  for (const [id, group] of [['a-1', 'acme'], ['b-1', 'beta'], ['a-2', 'acme'], ['a-3', 'acme'], ['b-2', 'beta'], ['a-4', 'acme']]) {
    await api.enqueue('tenants', { id, task: 'sync', group, priority: 5 });
  }
  await api.enqueue('tenants', { id: 'n-1', task: 'sync', priority: 5 });
  // archive: 25 dead jobs, more than one page of the DLQ.
  for (let i = 1; i <= 25; i += 1) {
    await api.kill('archive', `old-${String(i).padStart(2, '0')}`, `disk full (${i})`);
  }
});

after(async () => {
  await browser?.close();
  await prioq?.stop();
  await redis?.stop();
  await killAll();
});

/** The element of one count of a queue's card in the overview. */
const count = (page, queue, field) => page.locator(`[data-queue="${queue}"] [data-count="${field}"]`);

describe('the ui routes', () => {
  test('serve the page and its files with their content types and a self-only policy', async () => {
    for (const [route, type] of [
      ['/ui', 'text/html; charset=utf-8'],
      ['/ui/', 'text/html; charset=utf-8'],
      ['/ui/app.js', 'text/javascript; charset=utf-8'],
      ['/ui/style.css', 'text/css; charset=utf-8'],
      ['/ui/favicon.svg', 'image/svg+xml'],
    ]) {
      const answer = await prioq.api.request('GET', route);
      assert.equal(answer.status, 200, route);
      assert.equal(answer.headers.get('content-type'), type, route);
      const policy = answer.headers.get('content-security-policy');
      assert.match(policy, /default-src 'none'/, route);
      assert.match(policy, /script-src 'self'/, route);
      assert.match(policy, /connect-src 'self'/, route);
      assert.doesNotMatch(policy, /unsafe|\*|https?:/, route);
      assert.equal(answer.headers.get('x-content-type-options'), 'nosniff', route);
    }
    const missing = await prioq.api.request('GET', '/ui/nope.js');
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get('content-type'), 'application/problem+json');
  });

  test('are not in the OpenAPI document', async () => {
    const document = await prioq.api.expect(200, 'GET', '/openapi.json');
    assert.deepEqual(Object.keys(document.paths).filter((route) => route.startsWith('/ui')), []);
  });
});

describe('the overview', () => {
  test('shows every queue with its counts, classes and trends, refreshed by itself', async () => {
    const page = await openPage(browser);
    await page.goto(prioq.base + UI);
    await expectText(count(page, 'emails', 'pending'), '6');
    await expectText(count(page, 'emails', 'scheduled'), '1');
    await expectText(count(page, 'emails', 'processing'), '1');
    await expectText(count(page, 'emails', 'expired_leases'), '0');
    await expectText(count(page, 'emails', 'dead'), '2');
    await expectText(count(page, 'reports', 'pending'), '3');
    await expectText(count(page, 'archive', 'dead'), '25');
    const emails = page.locator('[data-queue="emails"]');
    for (const [priority, depth] of [[0, '2'], [5, '1'], [9, '3']]) {
      await expectText(emails.locator(`tr[data-priority="${priority}"] [data-field="depth"]`), depth);
    }
    await expectText(emails.locator('tr[data-priority="9"] [data-field="oldest"]'), /\d+ (ms|s)/);

    // More work arrives: the page picks it up without a reload, and the
    // trend of priority 9 of reports climbs.
    for (const id of ['r-4', 'r-5', 'r-6']) await prioq.api.enqueue('reports', { id, task: 'render', priority: 9 });
    await expectText(count(page, 'reports', 'pending'), '6');
    const trend = page.locator('[data-queue="reports"] tr[data-priority="9"] svg.spark.depth');
    await trend.locator('polyline').waitFor({ state: 'attached' });
    await page.locator('[data-queue="reports"] tr[data-priority="9"] svg.spark.depth[data-samples="5"]').waitFor({ state: 'attached' });
    assert.match(await trend.getAttribute('aria-label'), /Depth of priority 9 over the last .*: 3 to 6, now 6/);
    await expectText(page.locator('#live'), /^Live/);

    await screenshot(page, 'overview');
    await page.setViewportSize(PHONE);
    await screenshot(page, 'overview-phone');
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});

describe('a queue', () => {
  test('shows its classes and dead letters; a dead job is requeued and another deleted by clicking', async () => {
    const page = await openPage(browser);
    await page.goto(prioq.base + UI);
    await page.locator('[data-queue="emails"] h2 a').click();
    await expectText(page.locator('#queue-title'), 'emails');
    assert.match(page.url(), /#\/queues\/emails$/);
    for (const [priority, depth] of [[0, '2'], [5, '1'], [9, '3']]) {
      await expectText(page.locator(`#classes tr[data-priority="${priority}"] [data-field="depth"]`), depth);
    }
    await expectText(page.locator('#dlq-total'), '(2)');
    const bounce1 = page.locator('#dlq tr[data-job="bounce-1"]');
    await expectText(bounce1.locator('[data-label="Last error"]'), 'SMTP 550: mailbox unavailable');
    await expectText(bounce1.locator('[data-label="Attempts"]'), '1 / 1');
    await expectText(bounce1.locator('[data-label="Died"]'), /ago$/);
    // Most recently dead first.
    assert.deepEqual(
      await page.locator('#dlq tbody tr').evaluateAll((rows) => rows.map((row) => row.dataset.job)),
      ['bounce-2', 'bounce-1'],
    );
    await page.locator('#classes svg.spark polyline').first().waitFor({ state: 'attached' });
    await screenshot(page, 'queue');
    await page.setViewportSize(PHONE);
    await screenshot(page, 'queue-phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('button', { name: 'Requeue bounce-1' }).click();
    await bounce1.waitFor({ state: 'detached' });
    await expectText(page.locator('#notice-text'), /^Requeued bounce-1: pending again/);
    await expectText(page.locator('#dlq-total'), '(1)');
    const requeued = await prioq.api.job('emails', 'bounce-1');
    assert.equal(requeued.body.state, 'pending');
    assert.equal(requeued.body.attempts, 0);
    assert.equal((await prioq.api.expect(200, 'GET', '/v1/queues/emails/dlq')).total, 1);

    page.once('dialog', (dialog) => dialog.accept());
    await page.getByRole('button', { name: 'Delete bounce-2' }).click();
    await page.locator('#no-dead').waitFor();
    await expectText(page.locator('#notice-text'), 'Deleted bounce-2.');
    assert.equal((await prioq.api.job('emails', 'bounce-2')).status, 404);
    await expectText(page.locator('#queue-counts [data-count="dead"]'), '0');
    await expectText(page.locator('#queue-counts [data-count="pending"]'), '7');
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('pages through a long dead-letter queue', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/archive`);
    await expectText(page.locator('#dlq-total'), '(25)');
    const rows = page.locator('#dlq tbody tr');
    await page.locator('#dlq tr[data-job="old-25"]').waitFor();
    assert.equal(await rows.count(), 20);
    await page.getByRole('button', { name: 'Older →' }).click();
    await page.locator('#dlq tr[data-job="old-05"]').waitFor();
    assert.equal(await rows.count(), 5);
    await expectText(page.locator('#dlq-page'), 'Page 2');
    assert.equal(await page.getByRole('button', { name: 'Older →' }).isDisabled(), true);
    await page.getByRole('button', { name: '← Newer' }).click();
    await page.locator('#dlq tr[data-job="old-25"]').waitFor();
    assert.equal(await rows.count(), 20);
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('shows a push target and that its deliveries fail', async () => {
    // Nothing listens on port 9 of loopback: every delivery is refused.
    const url = 'http://127.0.0.1:9/jobs';
    await prioq.api.push('pushed', { url, concurrency: 2 });
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/pushed`);
    const push = page.locator('#queue-settings [data-setting="push"]');
    await expectText(push, `${url} · 0 of 2 in flight · 0 delivered, 0 failed`);
    assert.equal(await push.getAttribute('class'), null);
    await prioq.api.enqueue('pushed', { id: 'p-1', task: 'notify', max_attempts: 1 });
    await expectText(push, `${url} · 0 of 2 in flight · 0 delivered, 1 failed · 1 failing in a row`);
    assert.equal(await push.getAttribute('class'), 'warn');
    assert.match(await push.getAttribute('title'), /^Last error: push: /);
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('shows how full a bounded queue is, in jobs and in bytes', async () => {
    // Each job counts 12 bytes: the task's length, 'scan', '{"n":1}'.
    await prioq.api.configure('bounded', { max_pending: 4, max_pending_bytes: 48 });
    for (const id of ['b-1', 'b-2', 'b-3']) await prioq.api.enqueue('bounded', { id, task: 'scan', args: { n: 1 } });
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/bounded`);
    const bound = page.locator('#queue-settings [data-setting="max_pending"]');
    const bytes = page.locator('#queue-settings [data-setting="max_pending_bytes"]');
    await expectText(bound, '3 of 4 waiting (75%)');
    await expectText(bytes, '36 of 48 bytes waiting (75%)');
    assert.equal(await bound.getAttribute('class'), null);
    assert.equal(await bytes.getAttribute('class'), null);
    await prioq.api.enqueue('bounded', { id: 'b-4', task: 'scan', args: { n: 1 } });
    await expectText(bound, '4 of 4 waiting (100%)');
    await expectText(bytes, '48 of 48 bytes waiting (100%)');
    assert.equal(await bound.getAttribute('class'), 'warn');
    assert.equal(await bytes.getAttribute('class'), 'warn');
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('finds a processing job by id, with its worker, lease, fence, expiry, dedup key and backoff', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/emails`);
    await page.getByLabel('Job id').fill('welcome-1');
    await page.getByRole('button', { name: 'Look up' }).click();
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="state"]'), 'processing');
    await expectText(job.locator('[data-field="worker"]'), 'mailer-7');
    await expectText(job.locator('[data-field="lease_token"]'), processing.lease_token);
    await expectText(job.locator('[data-field="fence"]'), String(processing.fence));
    await expectText(job.locator('[data-field="lease_expires_at"]'), /^in \d+ min/);
    assert.equal(await job.locator('[data-field="lease_expires_at"]').getAttribute('title'), processing.lease_expires_at);
    await expectText(job.locator('[data-field="expires_at"]'), /^in \d+ min/);
    assert.equal(await job.locator('[data-field="expires_at"]').getAttribute('title'), processing.expires_at);
    await expectText(job.locator('[data-field="dedup_key"]'), 'welcome:user-42');
    await expectText(job.locator('[data-field="attempts"]'), '0 of 5');
    await expectText(job.locator('[data-field="backoff"]'), '5000 ms, doubling with each failure');
    assert.match(page.url(), /#\/queues\/emails\/jobs\/welcome-1$/);
    await screenshot(page, 'job');

    await page.getByLabel('Job id').fill('no-such-job');
    await page.getByRole('button', { name: 'Look up' }).click();
    await expectText(page.locator('#lookup-result'), /No job “no-such-job” in emails/);
    assert.deepEqual(page.problems.filter((problem) => !problem.includes('404')), []);
    await page.close();
  });

  test('cancels a job from its view', async () => {
    await prioq.api.enqueue('emails', { id: 'cancel-me', task: 'send_email', delay_ms: 600000, retain_ms: 600000 });
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/emails/jobs/cancel-me`);
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="state"]'), 'scheduled');
    page.once('dialog', (dialog) => dialog.accept());
    await page.getByRole('button', { name: 'Cancel job cancel-me' }).click();
    await expectText(page.locator('#notice'), /Cancelled cancel-me/);
    await expectText(job.locator('[data-field="state"]'), 'cancelled');
    assert.equal(await page.getByRole('button', { name: 'Cancel job cancel-me' }).count(), 0);
    assert.equal((await prioq.api.job('emails', 'cancel-me')).body.state, 'cancelled');
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('shows a waiting job with its dependencies, and a job with its dependants', async () => {
    await prioq.api.enqueue('emails', { id: 'render-1', task: 'render', delay_ms: 600000 });
    await prioq.api.enqueue('emails', { id: 'digest-1', task: 'digest', after: ['render-1'] });
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/emails/jobs/digest-1`);
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="state"]'), 'waiting');
    await expectText(job.locator('[data-field="waiting_for"]'), '1 of 1');
    await expectText(job.locator('[data-field="dependencies"]'), /emails\/render-1\s+not ended/);
    await expectText(page.locator('#queue-counts [data-count="waiting"]'), /^[1-9]/);
    await job.locator('[data-field="dependencies"] a').click();
    await expectText(job.locator('[data-field="id"]'), 'render-1');
    await expectText(job.locator('[data-field="dependants"]'), 'emails/digest-1');
    assert.match(page.url(), /#\/queues\/emails\/jobs\/render-1$/);
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});

describe('a queue with groups', () => {
  /** The text of one setting in the queue page's settings strip. */
  const setting = (page, field) => page.locator(`#queue-settings [data-setting="${field}"]`);

  test('shows its settings, and its groups most pending first with their counts and weights', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/tenants`);
    await expectText(page.locator('#queue-title'), 'tenants');
    await expectText(setting(page, 'paused'), 'no');
    await expectText(setting(page, 'max_in_flight'), 'no limit');
    await expectText(setting(page, 'rate_limit'), '50 jobs/s, burst 50');
    await expectText(setting(page, 'group_max_in_flight'), '10 jobs at once');
    await expectText(setting(page, 'group_rate_limit'), '5 jobs/s, burst 5');
    await expectText(setting(page, 'group_weights'), 'beta ×3, others ×1');
    assert.equal(await page.locator('#queue-paused').isHidden(), true);
    await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();

    await expectText(page.locator('#groups-total'), '(3)');
    const rows = page.locator('#groups tbody tr');
    await page.locator('#groups tr[data-group="gamma"]').waitFor();
    const table = await rows.evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    assert.deepEqual(table, [
      ['acme', '4', '0', '1'],
      ['beta', '2', '0', '3'],
      ['gamma', '1', '1', '1'],
    ]);
    assert.deepEqual(
      await page.locator('#groups th').allTextContents(),
      ['Group', 'Pending', 'Processing', 'Weight'],
    );
    assert.equal(await page.locator('#groups-pager').isHidden(), true);
    assert.equal(await page.locator('#no-groups').isHidden(), true);

    // More work for beta: the table follows without a reload.
    for (const id of ['b-3', 'b-4', 'b-5']) await prioq.api.enqueue('tenants', { id, task: 'sync', group: 'beta', priority: 5 });
    await expectText(page.locator('#groups tr[data-group="beta"] [data-field="pending"]'), '5');
    assert.deepEqual(
      await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.group)),
      ['beta', 'acme', 'gamma'],
    );

    // A queue without named groups says so.
    await page.goto(`${prioq.base}${UI}#/queues/reports`);
    await expectText(page.locator('#queue-title'), 'reports');
    await page.locator('#no-groups').waitFor();
    await expectText(page.locator('#groups-total'), '(0)');
    assert.equal(await page.locator('#groups').isHidden(), true);
    await expectText(setting(page, 'group_weights'), 'all 1');
    await expectText(setting(page, 'rate_limit'), 'none');
    await expectText(setting(page, 'group_rate_limit'), 'none');
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('is paused and resumed by clicking, and the overview marks it while paused', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/tenants`);
    await page.locator('#groups tr[data-group="gamma"]').waitFor();

    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.getByRole('button', { name: 'Resume', exact: true }).waitFor();
    await expectText(page.locator('#notice-text'), /^Paused tenants: claims hand out no jobs/);
    await expectText(setting(page, 'paused'), 'yes');
    await expectText(page.locator('#queue-paused'), 'Paused');
    assert.equal((await prioq.api.settings('tenants')).paused, true);
    assert.equal((await prioq.api.stats('tenants')).paused, true);
    assert.deepEqual(await prioq.api.claim('tenants', 'eager-1'), []);
    // Still paused after a few refreshes.
    await page.waitForTimeout(1500);
    await expectText(setting(page, 'paused'), 'yes');
    await screenshot(page, 'queue-groups');
    await page.setViewportSize(PHONE);
    await screenshot(page, 'queue-groups-phone');
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      'the queue page is no wider than a phone');
    await page.setViewportSize({ width: 1280, height: 800 });

    await page.getByRole('link', { name: 'Queues' }).click();
    const tenants = page.locator('[data-queue="tenants"]');
    await expectText(tenants.locator('.badge.paused'), 'Paused');
    await expectText(tenants.locator('[data-count="groups"]'), '3 groups with jobs');
    assert.equal(await page.locator('[data-queue="emails"] .badge.paused').count(), 0);

    await tenants.locator('h2 a').click();
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();
    await expectText(page.locator('#notice-text'), /^Resumed tenants: claims hand out jobs again/);
    await expectText(setting(page, 'paused'), 'no');
    assert.equal(await page.locator('#queue-paused').isHidden(), true);
    assert.equal((await prioq.api.settings('tenants')).paused, false);

    // Paused and resumed elsewhere: the page follows on its own.
    await prioq.api.expect(200, 'POST', '/v1/queues/tenants/pause');
    await page.getByRole('button', { name: 'Resume', exact: true }).waitFor();
    await prioq.api.expect(200, 'POST', '/v1/queues/tenants/resume');
    await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();

    await page.getByRole('link', { name: 'Queues' }).click();
    await expectText(count(page, 'tenants', 'pending'), /\d+/);
    assert.equal(await page.locator('[data-queue="tenants"] .badge.paused').count(), 0);
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('pages through many groups', async () => {
    for (let i = 1; i <= 23; i += 1) {
      await prioq.api.enqueue('crowd', { task: 'sync', group: `c-${String(i).padStart(2, '0')}` });
    }
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/crowd`);
    await expectText(page.locator('#groups-total'), '(23)');
    const rows = page.locator('#groups tbody tr');
    const names = () => rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.group));
    await expectText(page.locator('#groups-page'), 'Page 1');
    assert.equal(await rows.count(), 20);
    const first = await names();
    await page.getByRole('button', { name: 'Next page of groups' }).click();
    await expectText(page.locator('#groups-page'), 'Page 2');
    await page.waitForFunction(() => document.querySelectorAll('#groups tbody tr').length === 3);
    const second = await names();
    assert.equal(new Set([...first, ...second]).size, 23);
    assert.equal(await page.getByRole('button', { name: 'Next page of groups' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Previous page of groups' }).click();
    await expectText(page.locator('#groups-page'), 'Page 1');
    await page.waitForFunction(() => document.querySelectorAll('#groups tbody tr').length === 20);
    assert.deepEqual(await names(), first);
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('the job lookup shows a job\'s group, or none', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/tenants/jobs/a-2`);
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="id"]'), 'a-2');
    await expectText(job.locator('[data-field="group"]'), 'acme');
    await expectText(job.locator('[data-field="state"]'), 'pending');
    await page.getByLabel('Job id').fill('n-1');
    await page.getByRole('button', { name: 'Look up' }).click();
    await expectText(job.locator('[data-field="id"]'), 'n-1');
    await expectText(job.locator('[data-field="group"]'), 'none');
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});

describe('search and history', () => {
  before(async () => {
    const { api } = prioq;
    await api.configure('searched', { history_ms: 3600000 });
    await api.enqueue('searched', { id: 's-1', task: 'bill', args: { tenant: 'acme' } });
    await api.enqueue('searched', { id: 's-2', task: 'bill', args: { tenant: 'beta' } });
    await api.enqueue('searched', { id: 's-3', task: 'bill', args: { tenant: 'acme' }, group: 'g' });
    const [job] = await api.claim('searched', 'biller-1');
    assert.equal(job.id, 's-1');
    await api.expect(200, 'POST', '/v1/queues/searched/jobs/s-1/nack', { lease_token: job.lease_token, error: 'smtp down' });
  });

  test('finds jobs by a field of their args and shows a found job\'s history', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/searched`);
    await expectText(page.locator('#queue-settings [data-setting="history_ms"]'), 'kept 1 h');
    await page.getByLabel('Args field').fill('tenant');
    await page.getByLabel('equals').fill('acme');
    await page.getByRole('button', { name: 'Search' }).click();
    await expectText(page.locator('#found-note'), '2 found; every job looked at.');
    const rows = page.locator('#found tbody tr');
    assert.deepEqual((await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.job))).sort(), ['s-1', 's-3']);
    await page.getByLabel('State', { exact: true }).selectOption('pending');
    await page.getByLabel('Group', { exact: true }).fill('g');
    await page.getByRole('button', { name: 'Search' }).click();
    await expectText(page.locator('#found-note'), '1 found; every job looked at.');
    await page.getByLabel('Group', { exact: true }).fill('');
    await page.getByRole('button', { name: 'Search' }).click();
    await expectText(page.locator('#found-note'), '2 found; every job looked at.');
    await page.locator('#found a', { hasText: 's-1' }).click();
    const history = page.locator('#job-history li');
    await history.nth(2).waitFor();
    assert.deepEqual(await history.evaluateAll((items) => items.map((li) => li.dataset.event)),
      ['enqueued', 'claimed', 'nacked']);
    await expectText(history.nth(1), /claimed · by biller-1 · fence \d+$/);
    await expectText(history.nth(2), /nacked · → pending · smtp down$/);
    await screenshot(page, 'job-history');
    assert.deepEqual(page.problems, []);
    await page.close();
  });

  test('a deleted job\'s page says it is gone and still shows its history', async () => {
    await prioq.api.expect(204, 'DELETE', '/v1/queues/searched/jobs/s-2');
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/searched/jobs/s-2`);
    await expectText(page.locator('#lookup-result'), /No job “s-2” in searched/);
    const history = page.locator('#job-history li');
    await history.nth(1).waitFor();
    assert.deepEqual(await history.evaluateAll((items) => items.map((li) => li.dataset.event)),
      ['enqueued', 'deleted']);
    assert.deepEqual(page.problems.filter((problem) => !problem.includes('404')), []);
    await page.close();
  });
});

describe('completed jobs', () => {
  before(async () => {
    const { api } = prioq;
    await api.configure('results', { retain_ms: 3600000 });
    for (const id of ['done-1', 'busy-1']) await api.enqueue('results', { id, task: 'render', priority: 2 });
    const [done, busy] = await api.claim('results', 'renderer-1', { max_jobs: 2, lease_ms: 600000 });
    for (const [job, progress] of [[done, 'page 3 of 3'], [busy, { page: 2, of: 7 }]]) {
      await api.expect(200, 'POST', `/v1/queues/results/jobs/${job.id}/extend`,
        { lease_token: job.lease_token, progress });
    }
    await api.expect(204, 'POST', `/v1/queues/results/jobs/${done.id}/ack`,
      { lease_token: done.lease_token, result: { pages: 3, url: 'https://example.com/r.pdf' } });
  });

  test('the job lookup shows a completed job\'s result, and a running job\'s progress', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/results/jobs/done-1`);
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="state"]'), 'completed');
    await expectText(job.locator('[data-field="completed_at"]'), /ago|just now/);
    await expectText(job.locator('[data-field="result"]'), /"url": "https:\/\/example.com\/r.pdf"/);
    assert.equal(await job.locator('[data-field="progress"]').count(), 0);
    await expectText(page.locator('[data-count="completed"]'), '1');
    await expectText(page.locator('#queue-settings [data-setting="retain_ms"]'), '1 h');
    await screenshot(page, 'completed');
    await page.getByLabel('Job id').fill('busy-1');
    await page.getByRole('button', { name: 'Look up' }).click();
    await expectText(job.locator('[data-field="state"]'), 'processing');
    await expectText(job.locator('[data-field="progress"]'), /"of": 7/);
    assert.equal(await job.locator('[data-field="result"]').count(), 0);
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});

describe('schedules', () => {
  before(async () => {
    const { api } = prioq;
    await api.expect(201, 'PUT', '/v1/queues/timed/schedules/nightly',
      { cron: '0 2 * * *', timezone: 'Europe/Berlin', task: 'report' });
    await api.expect(201, 'PUT', '/v1/queues/timed/schedules/ticker', { cron: '* * * * * *', task: 'tick' });
  });

  after(async () => {
    await prioq.api.request('POST', '/v1/queues/timed/schedules/ticker/pause');
  });

  test('lists a queue\'s schedules, pauses and resumes one by clicking, and leads to the job it made', async () => {
    const page = await openPage(browser);
    await page.goto(`${prioq.base}${UI}#/queues/timed`);
    await expectText(page.locator('#schedules-total'), '(2)');
    const row = (name) => page.locator(`#schedules tr[data-schedule="${name}"]`);
    await expectText(row('nightly').locator('[data-field="cron"]'), '0 2 * * *');
    await expectText(row('nightly').locator('[data-field="timezone"]'), 'Europe/Berlin');
    await expectText(row('nightly').locator('[data-field="next_run_at"]'), /^in \d+/);
    await expectText(row('nightly').locator('[data-field="last_run_at"]'), 'never');
    // The ticker fires every second: its last job shows up by itself.
    const lastJob = row('ticker').locator('[data-field="last_job_id"] a');
    await expectText(lastJob, /^ticker:\d+$/);
    await screenshot(page, 'queue-schedules');

    await page.getByRole('button', { name: 'Pause ticker' }).click();
    await expectText(page.locator('#notice-text'), /^Paused schedule ticker/);
    await expectText(row('ticker').locator('[data-field="next_run_at"]'), 'paused');
    const paused = await prioq.api.expect(200, 'GET', '/v1/queues/timed/schedules/ticker');
    assert.equal(paused.paused, true);
    await page.getByRole('button', { name: 'Resume ticker' }).click();
    // The ticker's next second may begin before the page reads the answer.
    await expectText(page.locator('#notice-text'), /^Resumed schedule ticker: it fires next (in \d|now\.)/);
    await page.getByRole('button', { name: 'Pause ticker' }).waitFor();

    const id = await lastJob.textContent();
    await lastJob.click();
    const job = page.locator('#lookup-result dl.job');
    await expectText(job.locator('[data-field="id"]'), id);
    await expectText(job.locator('[data-field="schedule"]'), 'ticker');
    await expectText(job.locator('[data-field="task"]'), 'tick');
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});

describe('with API tokens', () => {
  let secured;

  before(async () => {
    secured = await startPrioq(redis, { tokens: ['s3cret-token'] });
    await secured.api.enqueue('secure', { id: 's-1', task: 'audit' });
  });

  after(async () => {
    await secured?.stop();
  });

  test('the page loads without a token, asks for one, refuses a wrong one and works with the right one', async () => {
    const page = await openPage(browser);
    const response = await page.goto(secured.base + UI);
    assert.equal(response.status(), 200);
    await expectText(page.locator('#alert-title'), 'This prioq needs an API token');
    await expectText(page.locator('#live'), 'Unauthorized');

    await page.getByLabel('API token').fill('wrong-token');
    await page.getByRole('button', { name: 'Use' }).click();
    await expectText(page.locator('#alert-title'), 'The API token was refused');
    await expectText(page.locator('#alert-detail'), /401 unauthorized/);
    await screenshot(page, 'token-refused', { fullPage: false });

    await page.getByLabel('API token').fill('s3cret-token');
    await page.getByRole('button', { name: 'Use' }).click();
    await expectText(count(page, 'secure', 'pending'), '1');
    await page.locator('#alert').waitFor({ state: 'hidden' });
    assert.equal(await page.evaluate(() => sessionStorage.getItem('prioq.token')), 's3cret-token');
    assert.equal(await page.evaluate(() => localStorage.length), 0);

    // Kept for this tab: a reload still works, another tab asks again.
    await page.reload();
    await expectText(count(page, 'secure', 'pending'), '1');
    const other = await openPage(browser);
    await other.goto(secured.base + UI);
    await expectText(other.locator('#alert-title'), 'This prioq needs an API token');

    await page.getByRole('button', { name: 'Forget' }).click();
    await expectText(page.locator('#alert-title'), 'This prioq needs an API token');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('prioq.token')), null);
    for (const tab of [page, other]) {
      assert.deepEqual(tab.problems.filter((problem) => !problem.includes('401')), []);
      await tab.close();
    }
  });
});

describe('when the backend fails', () => {
  let lonelyRedis;
  let lonely;

  before(async () => {
    lonelyRedis = await startRedis();
    lonely = await startPrioq(lonelyRedis);
    await lonely.api.enqueue('jobs', { id: 'j-1', task: 'work' });
  });

  after(async () => {
    await lonely?.stop();
    await lonelyRedis?.stop();
  });

  test('the page says Redis is unavailable, then that prioq cannot be reached, and recovers', async () => {
    const page = await openPage(browser);
    await page.goto(lonely.base + UI);
    await expectText(count(page, 'jobs', 'pending'), '1');

    await lonelyRedis.stop();
    await expectText(page.locator('#alert-title'), 'Backend unavailable: prioq cannot reach Redis');
    await expectText(page.locator('#alert-detail'), /503 backend_unavailable/);
    await expectText(page.locator('#live'), 'Backend down');
    await screenshot(page, 'backend-down', { fullPage: false });

    // Redis comes back, empty (it kept nothing on disk, not even the list
    // of queues): so does the page.
    lonelyRedis = await startRedis({ port: lonelyRedis.port });
    await page.locator('#alert').waitFor({ state: 'hidden' });
    await expectText(page.locator('#live'), /^Live/);
    await page.locator('#no-queues').waitFor({ state: 'visible' });
    assert.equal(await page.locator('[data-queue="jobs"]').count(), 0);

    await lonely.stop();
    await expectText(page.locator('#alert-title'), 'prioq cannot be reached');
    await expectText(page.locator('#live'), 'Offline');
    await screenshot(page, 'offline', { fullPage: false });
    const unexpected = page.problems.filter((problem) => !/503|ERR_CONNECTION_REFUSED|Failed to fetch/.test(problem));
    assert.deepEqual(unexpected, []);
    await page.close();
  });
});
