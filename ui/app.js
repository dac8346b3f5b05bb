// The prioq dashboard. It speaks only the public /v1 API, with the token
// kept in this tab's sessionStorage, polls it every few seconds, keeps the
// last minutes of samples of every priority class for the sparklines, and
// shows one of two views chosen by the URL's hash:
//   #/                          every queue
//   #/queues/NAME[/jobs/ID]     one queue: settings, classes, groups,
//                               schedules, dead
//                               letters, a job
// Everything from the API reaches the page as text (textContent), never as
// markup.

const TOKEN_KEY = 'prioq.token';
const settings = new URLSearchParams(location.search);
const REFRESH_MS = clamp(Number(settings.get('refresh')) || 3000, 500, 60000);
const WINDOW_MS = 10 * 60 * 1000;
const DLQ_PAGE = 20;
const GROUPS_PAGE = 20;
const SEARCH_PAGE = 20;
const WEIGHTS_SHOWN = 5;
const OVERVIEW_CLASSES = 8;
const SVG = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

const state = {
  generation: 0,
  timer: undefined,
  queue: undefined,
  dlqCursors: [null],
  dlqNext: null,
  dlqShown: '',
  groupCursors: [null],
  groupNext: null,
  schedulesShown: '',
  updated: undefined,
  // The search shown: its query, and the cursor of its next page.
  search: { query: null, next: null, scanned: 0 },
};

// ---- the API -------------------------------------------------------------

/** prioq did not answer at all: down, or the network failed. */
class Unreachable extends Error {}

/** prioq (or a proxy before it) answered with an error status. */
class Refused extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: 'no-store', signal: AbortSignal.timeout(15000) };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  let text;
  try {
    response = await fetch(path, init);
    text = await response.text();
  } catch (error) {
    throw new Unreachable(error.message);
  }
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new Refused(response.status, data && typeof data === 'object' ? data : null);
  }
  return data;
}

const queuePath = (queue) => `/v1/queues/${encodeURIComponent(queue)}`;

/** What went wrong, in words a person can act on: { title, detail, live }. */
function describe(error) {
  const retrying = `The page keeps retrying every ${duration(REFRESH_MS)}.`;
  if (error instanceof Unreachable) {
    return {
      title: 'prioq cannot be reached',
      detail: `No answer from ${location.host}: the service is down or the network failed. ${retrying}`,
      live: 'Offline',
    };
  }
  if (!(error instanceof Refused)) {
    return { title: 'Unexpected error', detail: String(error), live: 'Error' };
  }
  const code = error.problem?.code;
  const detail = error.problem?.detail ?? '';
  if (error.status === 401) {
    const hasToken = Boolean(sessionStorage.getItem(TOKEN_KEY));
    return {
      title: hasToken ? 'The API token was refused' : 'This prioq needs an API token',
      detail: hasToken
        ? 'prioq answered 401 unauthorized: the token is wrong or no longer accepted. Enter a valid one above.'
        : 'prioq answered 401 unauthorized. Enter an API token above; it is kept for this tab only.',
      live: 'Unauthorized',
    };
  }
  if (error.status === 503 || code === 'backend_unavailable') {
    return {
      title: 'Backend unavailable: prioq cannot reach Redis',
      detail: `${detail || 'The service is unavailable.'} (${error.status} ${code ?? 'service unavailable'}). ${retrying}`,
      live: 'Backend down',
    };
  }
  if (!error.problem && [502, 504].includes(error.status)) {
    return {
      title: 'A proxy in front of prioq got no answer',
      detail: `HTTP ${error.status}: no prioq instance answered. ${retrying}`,
      live: 'Offline',
    };
  }
  return {
    title: `${error.status} ${code ?? 'error'}`,
    detail: detail || `prioq answered HTTP ${error.status}.`,
    live: 'Error',
  };
}

// ---- refreshing ----------------------------------------------------------

/**
 * Renders the current view from fresh data, then schedules the next
 * refresh. A newer refresh (a click, a hash change) supersedes an older one
 * still in flight: the older one neither renders nor schedules.
 */
async function refresh() {
  clearTimeout(state.timer);
  const generation = ++state.generation;
  const current = route();
  try {
    if (current.view === 'queue') {
      await renderQueue(current, generation);
    } else {
      await renderOverview(generation);
    }
    if (generation === state.generation) {
      state.updated = new Date();
      delete document.body.dataset.stale;
      $('alert').hidden = true;
      setLive('ok', `Live · ${state.updated.toLocaleTimeString()}`);
    }
  } catch (error) {
    if (generation === state.generation) showAlert(error);
  } finally {
    if (generation === state.generation) {
      state.timer = setTimeout(refresh, REFRESH_MS);
    }
  }
}

function showAlert(error) {
  const { title, detail, live } = describe(error);
  const shown = state.updated ? ` The figures below are from ${state.updated.toLocaleTimeString()}.` : '';
  $('alert-title').textContent = title;
  $('alert-detail').textContent = detail + shown;
  document.body.dataset.stale = '';
  $('alert').hidden = false;
  setLive('error', live);
}

function setLive(kind, text) {
  $('live').dataset.state = kind;
  $('live').textContent = text;
}

function notice(text, kind = 'ok') {
  $('notice-text').textContent = text;
  $('notice').dataset.kind = kind;
  $('notice').hidden = false;
}

function route() {
  let parts;
  try {
    parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  } catch {
    parts = [];
  }
  if (parts[0] === 'queues' && parts[1]) {
    return { view: 'queue', queue: parts[1], job: parts[2] === 'jobs' ? parts[3] : undefined };
  }
  return { view: 'overview' };
}

function show(view) {
  $('overview-view').hidden = view !== 'overview';
  $('queue-view').hidden = view !== 'queue';
}

function setCrumbs(queue) {
  const crumbs = $('crumbs');
  if (queue === undefined) {
    crumbs.replaceChildren();
    return;
  }
  crumbs.replaceChildren(link('#/', 'Queues'), ' › ', text('span', queue));
}

// ---- trends --------------------------------------------------------------

/** Samples per queue and priority: [{ t, pending, age }], the last WINDOW_MS. */
const history = new Map();

const historyKey = (queue, priority) => `${queue}\n${priority}`;

function record(stats, now) {
  const seen = new Set();
  for (const cls of stats.classes) {
    const key = historyKey(stats.queue, cls.priority);
    seen.add(key);
    append(key, { t: now, pending: cls.pending, age: cls.oldest_age_ms });
  }
  // A class that drained shows as zero rather than ending its line.
  for (const key of history.keys()) {
    if (key.startsWith(`${stats.queue}\n`) && !seen.has(key)) {
      append(key, { t: now, pending: 0, age: 0 });
    }
  }
}

function append(key, sample) {
  const samples = history.get(key) ?? [];
  samples.push(sample);
  while (samples.length > 0 && samples[0].t < sample.t - WINDOW_MS) samples.shift();
  history.set(key, samples);
}

/** An inline SVG line of one field of the samples, scaled to its maximum. */
function sparkline(samples, field, label, format) {
  const width = 100;
  const height = 24;
  const pad = 2;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('class', `spark ${field === 'age' ? 'age' : 'depth'}`);
  svg.setAttribute('role', 'img');
  const base = document.createElementNS(SVG, 'line');
  base.setAttribute('class', 'base');
  base.setAttribute('x1', '0');
  base.setAttribute('x2', String(width));
  base.setAttribute('y1', String(height - pad));
  base.setAttribute('y2', String(height - pad));
  svg.append(base);
  if (samples.length === 0) {
    svg.setAttribute('aria-label', `${label}: no samples yet`);
    return svg;
  }
  const values = samples.map((sample) => sample[field]);
  const max = Math.max(...values);
  const min = Math.min(...values);
  const first = samples[0].t;
  const span = Math.max(samples[samples.length - 1].t - first, 1);
  const points = samples.map((sample, i) => {
    const x = samples.length === 1 ? width - pad : pad + ((sample.t - first) / span) * (width - 2 * pad);
    const y = max === 0 ? height - pad : height - pad - (values[i] / max) * (height - 2 * pad);
    return [x.toFixed(1), y.toFixed(1)];
  });
  if (points.length > 1) {
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', points.map((p) => p.join(',')).join(' '));
    svg.append(line);
  }
  const [x, y] = points[points.length - 1];
  const dot = document.createElementNS(SVG, 'circle');
  dot.setAttribute('class', field === 'age' ? 'age' : 'depth');
  dot.setAttribute('cx', x);
  dot.setAttribute('cy', y);
  dot.setAttribute('r', '1.8');
  svg.append(dot);
  const description = `${label} over the last ${duration(span)}: ${format(min)} to ${format(max)}, now ${format(values[values.length - 1])}`;
  svg.setAttribute('aria-label', description);
  svg.dataset.samples = String(samples.length);
  const title = document.createElementNS(SVG, 'title');
  title.textContent = description;
  svg.prepend(title);
  return svg;
}

// ---- the overview --------------------------------------------------------

async function renderOverview(generation) {
  const { queues } = await api('GET', '/v1/queues');
  const now = Date.now();
  for (const stats of queues) record(stats, now);
  if (generation !== state.generation) return;
  show('overview');
  setCrumbs(undefined);
  document.title = 'Queues · prioq';
  queues.sort((a, b) => a.queue.localeCompare(b.queue));
  $('no-queues').hidden = queues.length > 0;
  $('queues').replaceChildren(...queues.map(queueCard));
}

function queueCard(stats) {
  const card = document.createElement('article');
  card.className = 'card';
  card.dataset.queue = stats.queue;
  const heading = document.createElement('h2');
  heading.append(link(`#/queues/${encodeURIComponent(stats.queue)}`, stats.queue));
  if (stats.paused) {
    card.dataset.paused = '';
    heading.append(' ', text('span', 'Paused', 'badge paused'));
  }
  card.append(heading, counts(stats));
  if (stats.groups > 0) {
    const groups = text('p', `${stats.groups} ${stats.groups === 1 ? 'group' : 'groups'} with jobs`, 'hint groups');
    groups.dataset.count = 'groups';
    card.append(groups);
  }
  if (stats.classes.length === 0) {
    card.append(text('p', 'No pending jobs.', 'empty'));
    return card;
  }
  const shown = stats.classes.slice(0, OVERVIEW_CLASSES);
  card.append(classTable(stats.queue, shown));
  if (stats.classes.length > shown.length) {
    const more = text('p', '', 'hint');
    more.append(link(`#/queues/${encodeURIComponent(stats.queue)}`,
      `${stats.classes.length - shown.length} more priority classes`));
    card.append(more);
  }
  return card;
}

function counts(stats, list = document.createElement('dl')) {
  list.classList.add('counts');
  const entries = [
    ['pending', 'Pending', ''],
    ['scheduled', 'Scheduled', ''],
    ['waiting', 'Waiting', ''],
    ['processing', 'Processing', ''],
    ['expired_leases', 'Expired leases', 'warn'],
    ['dead', 'Dead', 'bad'],
    ['completed', 'Completed', ''],
  ];
  list.replaceChildren(...entries.map(([field, label, alarm]) => {
    const entry = document.createElement('div');
    const value = text('dd', String(stats[field]));
    value.dataset.count = field;
    if (alarm && stats[field] > 0) value.className = alarm;
    entry.append(text('dt', label), value);
    return entry;
  }));
  return list;
}

function classTable(queue, classes) {
  const table = document.createElement('table');
  table.className = 'classes';
  const head = document.createElement('thead');
  const headRow = document.createElement('tr');
  headRow.append(text('th', 'Priority'), text('th', 'Depth', 'num'), text('th', 'Trend'),
    text('th', 'Oldest', 'num'), text('th', 'Trend'));
  head.append(headRow);
  const body = document.createElement('tbody');
  body.append(...classRows(queue, classes));
  table.append(head, body);
  return table;
}

function classRows(queue, classes) {
  return classes.map((cls) => {
    const samples = history.get(historyKey(queue, cls.priority)) ?? [];
    const row = document.createElement('tr');
    row.dataset.priority = String(cls.priority);
    const depth = text('td', String(cls.pending), 'num');
    depth.dataset.field = 'depth';
    const age = text('td', duration(cls.oldest_age_ms), 'num');
    age.dataset.field = 'oldest';
    const depthTrend = document.createElement('td');
    depthTrend.append(sparkline(samples, 'pending', `Depth of priority ${cls.priority}`, String));
    const ageTrend = document.createElement('td');
    ageTrend.append(sparkline(samples, 'age', `Oldest job's age in priority ${cls.priority}`, duration));
    row.append(text('td', String(cls.priority)), depth, depthTrend, age, ageTrend);
    return row;
  });
}

// ---- one queue -----------------------------------------------------------

async function renderQueue(current, generation) {
  if (state.queue !== current.queue) {
    state.queue = current.queue;
    state.dlqCursors = [null];
    state.dlqShown = '';
    state.schedulesShown = '';
    state.groupCursors = [null];
    $('lookup-id').value = '';
    clearSearch();
  }
  if (current.job !== undefined && document.activeElement !== $('lookup-id')) {
    $('lookup-id').value = current.job;
  }
  const path = queuePath(current.queue);
  const cursor = state.dlqCursors[state.dlqCursors.length - 1];
  const groupCursor = state.groupCursors[state.groupCursors.length - 1];
  const [stats, queueSettings, schedules, groups, dead, found] = await Promise.all([
    api('GET', path),
    api('GET', `${path}/settings`),
    api('GET', `${path}/schedules`),
    api('GET', `${path}/groups?limit=${GROUPS_PAGE}${groupCursor ? `&cursor=${encodeURIComponent(groupCursor)}` : ''}`),
    api('GET', `${path}/dlq?limit=${DLQ_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
    current.job === undefined ? undefined : lookup(current.queue, current.job),
  ]);
  record(stats, Date.now());
  if (generation !== state.generation) return;
  // A page that emptied (jobs requeued, deleted or done): show the one
  // before it.
  let emptied = false;
  if (dead.jobs.length === 0 && state.dlqCursors.length > 1) {
    state.dlqCursors.pop();
    emptied = true;
  }
  if (groups.groups.length === 0 && state.groupCursors.length > 1) {
    state.groupCursors.pop();
    emptied = true;
  }
  if (emptied) {
    await renderQueue(current, generation);
    return;
  }
  show('queue');
  setCrumbs(current.queue);
  document.title = `${current.queue} · prioq`;
  $('queue-title').textContent = current.queue;
  counts(stats, $('queue-counts'));
  renderSettings(queueSettings, stats);
  $('classes').tBodies[0].replaceChildren(...classRows(current.queue, stats.classes));
  $('classes').hidden = stats.classes.length === 0;
  $('no-classes').hidden = stats.classes.length > 0;
  renderGroups(groups, stats.groups);
  renderSchedules(current.queue, schedules.schedules);
  renderDead(dead);
  renderLookup(current, found);
}

/**
 * The settings strip, and the Pause or Resume button that fits them; with
 * the queue's `stats` (when known), how full a bounded queue is.
 */
function renderSettings(queueSettings, stats) {
  const {
    paused, max_in_flight: maxInFlight, rate_limit: rate, group_max_in_flight: groupCap,
    group_rate_limit: groupRate, max_pending: maxPending, max_pending_bytes: maxPendingBytes,
  } = queueSettings;
  $('queue-paused').hidden = !paused;
  const toggle = $('pause-toggle');
  toggle.textContent = paused ? 'Resume' : 'Pause';
  toggle.dataset.action = paused ? 'resume' : 'pause';
  toggle.className = paused ? '' : 'warn';
  toggle.title = paused
    ? 'Claims hand out jobs again'
    : 'Claims hand out no jobs until the queue is resumed; enqueue, ack, nack and the sweeper go on';
  const entries = [
    ['paused', 'Paused', paused ? 'yes' : 'no', paused ? 'warn' : ''],
    ['max_in_flight', 'Max in flight', maxInFlight === null ? 'no limit' : `${maxInFlight} jobs`],
    ['rate_limit', 'Rate limit', rate === null ? 'none' : `${amount(rate.per_second)} jobs/s, burst ${rate.burst}`],
    ['group_max_in_flight', 'Per-group cap', groupCap === null ? 'none' : `${groupCap} jobs at once`],
    ['group_rate_limit', 'Per-group rate', groupRate == null ? 'none' : `${amount(groupRate.per_second)} jobs/s, burst ${groupRate.burst}`],
    ['group_weights', 'Weights', ...weights(queueSettings.group_weights)],
    ['max_pending', 'Bound', ...bound(maxPending, stats)],
    ['max_pending_bytes', 'Byte bound', ...byteBound(maxPendingBytes, stats)],
    ['push', 'Push', ...pushed(stats?.push)],
    ['retain_ms', 'Kept once acked', queueSettings.retain_ms > 0 ? duration(queueSettings.retain_ms) : 'not kept'],
    ['history_ms', 'Job histories', queueSettings.history_ms > 0 ? `kept ${duration(queueSettings.history_ms)}` : 'not kept'],
  ];
  $('queue-settings').replaceChildren(...entries.map(([field, label, value, className, title]) => {
    const entry = document.createElement('div');
    const dd = text('dd', value, className);
    dd.dataset.setting = field;
    if (title) dd.title = title;
    entry.append(text('dt', label), dd);
    return entry;
  }));
}

/**
 * A queue's `max_pending` and how full it is: [shown, className, title].
 * Waiting jobs are those pending, scheduled or waiting for others.
 */
function bound(maxPending, stats) {
  if (maxPending === null || maxPending === undefined) return ['none', '', 'Enqueues are never refused for the queue\'s size'];
  const title = 'At the bound, enqueues answer 429 queue_full and change nothing';
  if (!stats) return [`${maxPending} waiting`, '', title];
  const waiting = stats.pending + stats.scheduled + (stats.waiting ?? 0);
  const full = waiting >= maxPending;
  return [`${waiting} of ${maxPending} waiting (${Math.min(100, Math.round((100 * waiting) / maxPending))}%)`, full ? 'warn' : '', title];
}

/**
 * A queue's `max_pending_bytes` and how full it is: [shown, className,
 * title]. The bytes counted are those of the jobs that entered waiting
 * since the bound was set.
 */
function byteBound(maxPendingBytes, stats) {
  if (maxPendingBytes === null || maxPendingBytes === undefined) return ['none', '', 'Enqueues are never refused for the bytes waiting'];
  const title = 'At the bound, enqueues answer 429 queue_full and change nothing';
  const bytes = stats?.pending_bytes;
  if (bytes === null || bytes === undefined) return [`${maxPendingBytes} bytes waiting`, '', title];
  const full = bytes >= maxPendingBytes;
  return [`${bytes} of ${maxPendingBytes} bytes waiting (${Math.min(100, Math.round((100 * bytes) / maxPendingBytes))}%)`, full ? 'warn' : '', title];
}

/**
 * A queue's push target and how its deliveries go: [shown, className,
 * title]. A target whose last deliveries failed is a warning, with why.
 */
function pushed(push) {
  if (push === undefined) return ['…', '', ''];
  if (push === null) return ['none', '', 'Workers claim the queue\'s jobs; prioq pushes none'];
  const { health } = push;
  const shown = `${push.url} · ${health.in_flight} of ${push.concurrency} in flight · ${health.delivered} delivered, ${health.failed} failed`;
  if (health.consecutive_failures === 0) return [shown, '', `Each job is POSTed to ${push.url}`];
  const failing = `${shown} · ${health.consecutive_failures} failing in a row`;
  return [failing, 'warn', `Last error: ${health.last_error ?? 'none'}`];
}

/** Weights, heaviest first: [shown, className, title]. */
function weights(map) {
  const entries = Object.entries(map ?? {}).sort(([a, x], [b, y]) => y - x || a.localeCompare(b));
  if (entries.length === 0) return ['all 1', '', 'Every group has the default weight, 1'];
  const shown = entries.slice(0, WEIGHTS_SHOWN).map(([group, weight]) => `${group} ×${weight}`);
  if (entries.length > WEIGHTS_SHOWN) shown[shown.length - 1] += ` (+${entries.length - WEIGHTS_SHOWN} more)`;
  shown.push('others ×1');
  const title = entries.length > WEIGHTS_SHOWN
    ? entries.slice(0, 100).map(([group, weight]) => `${group} ×${weight}`).join(', ')
      + (entries.length > 100 ? ', …' : '')
    : '';
  return [shown.join(', '), '', title];
}

async function onPauseToggle() {
  const toggle = $('pause-toggle');
  const queue = state.queue;
  const pausing = toggle.dataset.action === 'pause';
  // aria-disabled rather than disabled: the button keeps the focus.
  if (!queue || toggle.getAttribute('aria-disabled') === 'true') return;
  toggle.setAttribute('aria-disabled', 'true');
  try {
    const answer = await api('POST', `${queuePath(queue)}/${pausing ? 'pause' : 'resume'}`);
    if (state.queue === queue) renderSettings(answer);
    notice(pausing
      ? `Paused ${queue}: claims hand out no jobs until it is resumed.`
      : `Resumed ${queue}: claims hand out jobs again.`);
  } catch (error) {
    const { title, detail } = describe(error);
    notice(`${pausing ? 'Pause' : 'Resume'} of ${queue} failed. ${title}: ${detail}`, 'error');
  } finally {
    toggle.removeAttribute('aria-disabled');
  }
  await refresh();
}

function renderGroups(page, total) {
  state.groupNext = page.next_cursor;
  const pageNumber = state.groupCursors.length;
  $('groups-total').textContent = `(${total})`;
  $('groups-previous').disabled = pageNumber === 1;
  $('groups-next').disabled = !page.next_cursor;
  $('groups-pager').hidden = pageNumber === 1 && !page.next_cursor;
  $('groups-page').textContent = `Page ${pageNumber}`;
  $('no-groups').hidden = page.groups.length > 0;
  $('groups').hidden = page.groups.length === 0;
  $('groups').tBodies[0].replaceChildren(...page.groups.map((group) => {
    const row = document.createElement('tr');
    row.dataset.group = group.group;
    const weight = text('td', String(group.weight), group.weight === 1 ? 'num' : 'num weighted');
    weight.dataset.field = 'weight';
    const cells = [['pending', group.pending], ['processing', group.processing]].map(([field, value]) => {
      const node = text('td', String(value), 'num');
      node.dataset.field = field;
      return node;
    });
    const name = text('td', group.group, 'id');
    name.dataset.field = 'group';
    row.append(name, ...cells, weight);
    return row;
  }));
}

/** A queue's schedules, each with a Pause or Resume button. */
function renderSchedules(queue, schedules) {
  $('schedules-total').textContent = `(${schedules.length})`;
  $('no-schedules').hidden = schedules.length > 0;
  $('schedules').hidden = schedules.length === 0;
  // Rebuilt only when it changed (or every half minute, for the relative
  // times), so a button is not replaced under the pointer.
  const shown = JSON.stringify([queue, schedules, Math.floor(Date.now() / 30000)]);
  if (shown === state.schedulesShown) return;
  state.schedulesShown = shown;
  $('schedules').tBodies[0].replaceChildren(...schedules.map((schedule) => {
    const row = document.createElement('tr');
    row.dataset.schedule = schedule.name;
    const next = cell('Next run', schedule.paused ? 'paused' : upcoming(schedule.next_run_at), schedule.paused ? 'warn' : '');
    next.title = schedule.next_run_at ?? '';
    next.dataset.field = 'next_run_at';
    const last = cell('Last run', schedule.last_run_at ? relative(schedule.last_run_at) : 'never');
    last.title = schedule.last_run_at ?? '';
    last.dataset.field = 'last_run_at';
    const job = cell('Last job', '', 'id');
    job.dataset.field = 'last_job_id';
    if (schedule.last_job_id) {
      job.append(link(`#/queues/${encodeURIComponent(queue)}/jobs/${encodeURIComponent(schedule.last_job_id)}`,
        schedule.last_job_id));
    }
    const actions = cell('', '', 'actions');
    actions.append(schedule.paused
      ? button('Resume', 'resume', schedule.name, '')
      : button('Pause', 'pause', schedule.name, 'warn'));
    const cron = cell('Cron', schedule.cron, 'code');
    cron.dataset.field = 'cron';
    const zone = cell('Time zone', schedule.timezone);
    zone.dataset.field = 'timezone';
    row.append(cell('Schedule', schedule.name, 'id'), cron, zone, cell('Task', schedule.task), next, last, job, actions);
    return row;
  }));
}

async function onScheduleAction(event) {
  const target = event.target.closest('button[data-action]');
  if (!target) return;
  const { action, id } = target.dataset;
  const queue = state.queue;
  target.disabled = true;
  try {
    const schedule = await api('POST', `${queuePath(queue)}/schedules/${encodeURIComponent(id)}/${action}`);
    notice(action === 'pause'
      ? `Paused schedule ${id}: it fires nothing until resumed.`
      : `Resumed schedule ${id}: it fires next ${upcoming(schedule.next_run_at)}.`);
  } catch (error) {
    const { title, detail } = describe(error);
    notice(`${action === 'pause' ? 'Pause' : 'Resume'} of schedule ${id} failed. ${title}: ${detail}`, 'error');
  }
  state.schedulesShown = '';
  await refresh();
}

function renderDead(page) {
  state.dlqNext = page.next_cursor;
  const pageNumber = state.dlqCursors.length;
  $('dlq-total').textContent = `(${page.total})`;
  $('dlq-newer').disabled = pageNumber === 1;
  $('dlq-older').disabled = !page.next_cursor;
  $('dlq-pager').hidden = pageNumber === 1 && !page.next_cursor;
  $('dlq-page').textContent = `Page ${pageNumber}`;
  $('no-dead').hidden = page.jobs.length > 0;
  $('dlq').hidden = page.jobs.length === 0;
  // Rebuilt only when it changed (or every half minute, for the relative
  // times), so a button is not replaced under the pointer.
  const shown = JSON.stringify([page.jobs, Math.floor(Date.now() / 30000)]);
  if (shown === state.dlqShown) return;
  state.dlqShown = shown;
  $('dlq').tBodies[0].replaceChildren(...page.jobs.map((job) => {
    const row = document.createElement('tr');
    row.dataset.job = job.id;
    const died = cell('Died', relative(job.dead_at));
    died.title = job.dead_at ?? '';
    const actions = cell('', '', 'actions');
    actions.append(
      button('Requeue', 'requeue', job.id, ''),
      button('Delete', 'delete', job.id, 'danger'),
    );
    row.append(
      cell('Job', job.id, 'id'),
      cell('Task', job.task),
      cell('Attempts', `${job.attempts} / ${job.max_attempts}`),
      cell('Last error', job.last_error ?? '', 'error'),
      died,
      actions,
    );
    return row;
  }));
}

async function onDeadAction(event) {
  const target = event.target.closest('button[data-action]');
  if (!target) return;
  const { action, id } = target.dataset;
  const queue = state.queue;
  if (action === 'delete' && !window.confirm(`Delete dead job ${id} from ${queue}? This cannot be undone.`)) {
    return;
  }
  for (const b of target.closest('tr').querySelectorAll('button')) b.disabled = true;
  const path = `${queuePath(queue)}/dlq/${encodeURIComponent(id)}`;
  try {
    if (action === 'requeue') {
      const job = await api('POST', `${path}/requeue`);
      notice(`Requeued ${id}: pending again at priority ${job.priority}, attempts reset to 0.`);
    } else {
      await api('DELETE', path);
      notice(`Deleted ${id}.`);
    }
  } catch (error) {
    const { title, detail } = describe(error);
    notice(`${action === 'requeue' ? 'Requeue' : 'Delete'} of ${id} failed. ${title}: ${detail}`, 'error');
  }
  state.dlqShown = '';
  await refresh();
}

/**
 * The job and its history, or why there is none: { job, events } |
 * { missing, events } | { invalid }. A job gone may have left its history.
 */
async function lookup(queue, id) {
  const path = `${queuePath(queue)}/jobs/${encodeURIComponent(id)}`;
  try {
    const orNull = (error) => {
      if (error instanceof Refused && error.status === 404) return null;
      throw error;
    };
    const [job, history] = await Promise.all([
      api('GET', path).catch(orNull),
      api('GET', `${path}/history`).catch(orNull),
    ]);
    const events = history === null ? [] : history.events;
    return job === null ? { missing: true, events } : { job, events };
  } catch (error) {
    if (error instanceof Refused && error.status === 400) return { invalid: error.message };
    throw error;
  }
}

/** A job's history, oldest first, as a list. */
function historyList(events) {
  const list = document.createElement('ol');
  list.className = 'history';
  list.id = 'job-history';
  list.append(...events.map((event) => {
    const item = document.createElement('li');
    item.dataset.event = event.event;
    const details = [];
    if (event.priority !== undefined) details.push(`priority ${event.priority}`);
    if (event.worker !== undefined) details.push(`by ${event.worker}`);
    if (event.fence !== undefined) details.push(`fence ${event.fence}`);
    if (event.state !== undefined) details.push(`→ ${event.state}`);
    if (event.error !== undefined) details.push(event.error);
    const at = text('time', relative(event.at), 'muted');
    at.dateTime = event.at;
    at.title = event.at;
    item.append(at, ' ', text('strong', event.event.replace('_', ' ')));
    if (details.length > 0) item.append(` · ${details.join(' · ')}`);
    return item;
  }));
  return list;
}

function renderLookup(current, found) {
  const out = $('lookup-result');
  if (found === undefined) {
    out.replaceChildren();
    return;
  }
  if (found.missing) {
    const nodes = [text('p',
      `No job “${current.job}” in ${current.queue}: it never existed, or it was acked (and not kept) or deleted.`, 'empty')];
    if (found.events.length > 0) nodes.push(text('h3', 'Its history'), historyList(found.events));
    out.replaceChildren(...nodes);
    return;
  }
  if (found.invalid) {
    out.replaceChildren(text('p', `“${current.job}” is not a job id: ${found.invalid}`, 'empty'));
    return;
  }
  const { job } = found;
  const list = document.createElement('dl');
  list.className = 'job';
  list.dataset.job = job.id;
  const add = (label, field, value, title) => {
    if (value === null || value === undefined || value === '') return;
    const dd = document.createElement('dd');
    dd.dataset.field = field;
    if (value instanceof Node) dd.append(value);
    else dd.textContent = value;
    if (title) dd.title = title;
    list.append(text('dt', label), dd);
  };
  add('Job', 'id', job.id);
  add('State', 'state', text('span', job.state, `state state-${job.state}`));
  add('Task', 'task', job.task);
  add('Priority', 'priority', String(job.priority));
  add('Group', 'group', job.group ?? text('span', 'none', 'muted'));
  add('Schedule', 'schedule', job.schedule);
  add('Attempts', 'attempts', `${job.attempts} of ${job.max_attempts}`);
  add('Backoff', 'backoff', job.backoff && (job.backoff.type === 'exponential'
    ? `${job.backoff.delay_ms} ms, doubling with each failure` : `${job.backoff.delay_ms} ms after each failure`));
  add('Enqueued', 'enqueued_at', relative(job.enqueued_at), job.enqueued_at);
  add('Runs at', 'run_at', job.run_at && relative(job.run_at), job.run_at);
  add('Expires', 'expires_at', job.expires_at && relative(job.expires_at), job.expires_at);
  add('Dedup key', 'dedup_key', job.dedup_key);
  add('Worker', 'worker', job.worker);
  add('Lease token', 'lease_token', job.lease_token);
  add('Fence', 'fence', job.fence === null || job.fence === undefined ? undefined : String(job.fence),
    'Grows with every grant of the job: pass it to the systems the worker writes to');
  add('Lease expires', 'lease_expires_at', job.lease_expires_at && relative(job.lease_expires_at), job.lease_expires_at);
  add('Last error', 'last_error', job.last_error);
  add('Died', 'dead_at', job.dead_at && relative(job.dead_at), job.dead_at);
  add('Completed', 'completed_at', job.completed_at && relative(job.completed_at), job.completed_at);
  add('Progress', 'progress', job.progress !== null && job.progress !== undefined
    ? text('pre', JSON.stringify(job.progress, null, 2)) : undefined);
  add('Args', 'args', text('pre', JSON.stringify(job.args, null, 2)));
  if (job.state === 'completed' || (job.state === 'cancelled' && job.result !== undefined)) {
    add('Result', 'result', job.result === null
      ? text('span', 'none', 'muted') : text('pre', JSON.stringify(job.result, null, 2)));
  }
  if (job.cancel_requested) add('Cancel', 'cancel_requested', 'asked; the worker is told with its next extend');
  add('Cancel reason', 'cancel_reason', job.cancel_reason);
  if (job.dependencies) {
    add('Waiting for', 'waiting_for', `${job.waiting_for} of ${job.dependencies.length}`);
    add('Dependencies', 'dependencies', jobLinks(job.dependencies.map(({ ref, state }) => [ref, state ?? 'not ended'])));
  }
  if (job.dependants && job.dependants.length > 0) {
    add('Dependants', 'dependants', jobLinks(job.dependants.map((ref) => [ref, ''])));
  }
  const nodes = [list];
  if (['pending', 'scheduled', 'waiting', 'processing'].includes(job.state) && !job.cancel_requested) {
    nodes.push(button('Cancel job', 'cancel', job.id, 'danger'));
  }
  nodes.push(text('h3', 'History'));
  nodes.push(found.events.length > 0
    ? historyList(found.events)
    : text('p', 'None kept: set the queue\'s history_ms to keep each job\'s events.', 'empty'));
  out.replaceChildren(...nodes);
}

// A list of jobs by their refs (`queue/id`), each a link to its view,
// with a note after it.
function jobLinks(entries) {
  const items = document.createElement('ul');
  items.className = 'refs';
  items.append(...entries.map(([ref, note]) => {
    const [queue, id] = ref.split('/');
    const item = document.createElement('li');
    const link = text('a', ref);
    link.href = `#/queues/${encodeURIComponent(queue)}/jobs/${encodeURIComponent(id)}`;
    item.append(link);
    if (note) item.append(' ', text('span', note, 'muted'));
    return item;
  }));
  return items;
}

async function onLookupAction(event) {
  const target = event.target.closest('button[data-action="cancel"]');
  if (!target) return;
  const { id } = target.dataset;
  const queue = state.queue;
  if (!window.confirm(`Cancel job ${id} of ${queue}? A running job is told to stop.`)) return;
  target.disabled = true;
  try {
    const job = await api('POST', `${queuePath(queue)}/jobs/${encodeURIComponent(id)}/cancel`);
    notice(job.state === 'cancelled' ? `Cancelled ${id}.` : `Asked ${id} to stop: its worker is told with its next extend.`);
  } catch (error) {
    const { title, detail } = describe(error);
    notice(`Cancel of ${id} failed. ${title}: ${detail}`, 'error');
  }
  await refresh();
}

function onLookup(event) {
  event.preventDefault();
  const id = $('lookup-id').value.trim();
  if (!id || !state.queue) return;
  const hash = `#/queues/${encodeURIComponent(state.queue)}/jobs/${encodeURIComponent(id)}`;
  if (location.hash === hash) refresh();
  else location.hash = hash;
}

function clearSearch() {
  state.search = { query: null, next: null, scanned: 0 };
  $('found').tBodies[0].replaceChildren();
  $('found').hidden = true;
  $('found-note').hidden = true;
  $('found-more').hidden = true;
}

/** Searches from the form, or the next page of the search shown. */
async function onSearch(event) {
  const more = event.type === 'click';
  if (!more) {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [name, value] of new FormData($('search-form'))) {
      if (value.trim() !== '') query.set(name, value.trim());
    }
    clearSearch();
    state.search.query = query;
  }
  const { query, next } = state.search;
  const queue = state.queue;
  if (!query || !queue) return;
  const page = new URLSearchParams(query);
  page.set('limit', String(SEARCH_PAGE));
  if (more && next) page.set('cursor', next);
  try {
    const found = await api('GET', `${queuePath(queue)}/jobs?${page}`);
    if (state.queue !== queue || state.search.query !== query) return;
    state.search.next = found.next_cursor;
    state.search.scanned += found.scanned;
    $('found').tBodies[0].append(...found.jobs.map((job) => foundRow(queue, job)));
    const shown = $('found').tBodies[0].rows.length;
    $('found').hidden = shown === 0;
    $('found-note').hidden = false;
    $('found-note').textContent = found.next_cursor
      ? `${shown} found in ${state.search.scanned} jobs looked at; more may match.`
      : `${shown} found; every job looked at.`;
    $('found-more').hidden = !found.next_cursor;
  } catch (error) {
    const { title, detail } = describe(error);
    notice(`Search of ${queue} failed. ${title}: ${detail}`, 'error');
  }
}

function foundRow(queue, job) {
  const row = document.createElement('tr');
  row.dataset.job = job.id;
  const id = document.createElement('td');
  id.dataset.label = 'Job';
  id.append(link(`#/queues/${encodeURIComponent(queue)}/jobs/${encodeURIComponent(job.id)}`, job.id));
  const jobState = document.createElement('td');
  jobState.dataset.label = 'State';
  jobState.append(text('span', job.state, `state state-${job.state}`));
  row.append(id, jobState, cell('Task', job.task), cell('Group', job.group ?? ''),
    cell('Attempts', `${job.attempts} of ${job.max_attempts}`), cell('Enqueued', relative(job.enqueued_at)));
  return row;
}

// ---- small helpers -------------------------------------------------------

function clamp(value, low, high) {
  return Math.min(Math.max(value, low), high);
}

function text(tag, content, className) {
  const node = document.createElement(tag);
  node.textContent = content;
  if (className) node.className = className;
  return node;
}

function link(href, content) {
  const node = text('a', content);
  node.href = href;
  return node;
}

function cell(label, content, className) {
  const node = text('td', content, className);
  node.dataset.label = label;
  return node;
}

function button(label, action, id, className) {
  const node = text('button', label, className);
  node.type = 'button';
  node.dataset.action = action;
  node.dataset.id = id;
  node.setAttribute('aria-label', `${label} ${id}`);
  return node;
}

/** 50, 0.5, 33.333: at most three decimals. */
function amount(value) {
  return String(Number(Number(value).toFixed(3)));
}

/** 850 ms, 12 s, 3 min 4 s, 2 h 5 min, 3 d 4 h. */
function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  return h % 24 ? `${Math.floor(h / 24)} d ${h % 24} h` : `${Math.floor(h / 24)} d`;
}

/** "3 min 4 s ago" or "in 55 s", by this browser's clock. */
function relative(iso) {
  if (!iso) return '';
  const ms = Date.now() - Date.parse(iso);
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
}

// When something due happens next: "in 3 s", or "now" once its time has
// come (a schedule whose second just began fires as the page reads it).
function upcoming(iso) {
  if (!iso) return '';
  const ms = Date.parse(iso) - Date.now();
  return ms > 0 ? `in ${duration(ms)}` : 'now';
}

// ---- start ---------------------------------------------------------------

$('token').value = sessionStorage.getItem(TOKEN_KEY) ?? '';
$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const token = $('token').value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  setLive('loading', 'Checking token…');
  refresh();
});
$('token-forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  $('token').value = '';
  refresh();
});
$('notice-close').addEventListener('click', () => {
  $('notice').hidden = true;
});
$('dlq').addEventListener('click', onDeadAction);
$('dlq-older').addEventListener('click', () => {
  if (!state.dlqNext) return;
  state.dlqCursors.push(state.dlqNext);
  refresh();
});
$('dlq-newer').addEventListener('click', () => {
  if (state.dlqCursors.length > 1) state.dlqCursors.pop();
  refresh();
});
$('pause-toggle').addEventListener('click', onPauseToggle);
$('schedules').addEventListener('click', onScheduleAction);
$('groups-next').addEventListener('click', () => {
  if (!state.groupNext) return;
  state.groupCursors.push(state.groupNext);
  refresh();
});
$('groups-previous').addEventListener('click', () => {
  if (state.groupCursors.length > 1) state.groupCursors.pop();
  refresh();
});
$('lookup-form').addEventListener('submit', onLookup);
$('search-form').addEventListener('submit', onSearch);
$('found-more').addEventListener('click', onSearch);
$('lookup-result').addEventListener('click', onLookupAction);
window.addEventListener('hashchange', () => {
  $('notice').hidden = true;
  refresh();
});
$('refresh-note').textContent =
  `Refreshes every ${duration(REFRESH_MS)}; trends cover the last ${duration(WINDOW_MS)}`;
refresh();
