-- The claim part of `exchange`: hands out jobs to the requests in turn,
-- up to each one's max_jobs: the most urgent class first, in fair order
-- inside it (see the library's header); the bulk floor's share takes the
-- first job of the least urgent class. A paused queue hands out nothing;
-- max_in_flight and the rate limit bound what is handed out; a head whose
-- group is at its cap goes back to its group set. The jobs handed out are
-- those a claim per request would have taken, one after the other.
-- Its section of ARGV: the number of requests, then per request lease_ms,
-- max_jobs, worker ('' for none), request id ('' for none), the jobs it
-- picked ('' for none: a part of a sharded queue's claim takes only the
-- jobs it picked from the shard's line, their ids separated by spaces;
-- see `take_picked`), number of acks, and an id, a lease token and a
-- result ('' for none) per ack
-- (applied before the request's jobs are handed out; see `claim_all`).
-- Answers, one request after the other, the number of jobs leased to it
-- and then id, record, lease token and lease deadline (ms) per job; and
-- why fewer jobs than asked were handed out: '' (none waiting, or all
-- handed out), 'paused', 'max_in_flight' or 'rate_limit', and the ms
-- until the next rate limit token (0 when not rate limited). The `expiry`
-- entries of the jobs handed out that have one go to `c.expiry_out` (id,
-- entry pairs), so that jobs without one cost nothing more, and the
-- dependencies of those enqueued with some to `c.deps_out` (id and
-- `dependencies_of` pairs).
-- Errors: none; every outcome is in the reply.

-- Whether job number n handed out (fleet-wide, counted by the floor key)
-- is a floor job: n crosses a multiple of 1/floor, so the share is exact.
local function floor_turn(n, ppm)
  return math.floor(n * ppm / 1000000) > math.floor((n - 1) * ppm / 1000000)
end

-- The first job, in fair order, of the least urgent non-empty class, taken
-- out of pending: {id, score}, or nil when pending is empty.
local function take_first_of_least_urgent(q)
  local last = redis.call('ZRANGE', q.pending, '-1', '-1', 'WITHSCORES')
  if #last == 0 then return nil end
  local class = class_of(last[2])
  local first = redis.call('ZRANGE', q.pending, decimal(class), '(' .. decimal(class + 1), 'BYSCORE', 'LIMIT', '0', '1',
    'WITHSCORES')
  redis.call('ZREM', q.pending, first[1])
  return first
end

-- Whether the member `a_id` of score `x` comes before `b_id` of score `y`
-- (numbers) in a sorted set: by score, then by bytes.
local function before(x, a_id, y, b_id)
  if x ~= y then return x < y end
  return bytes_before(a_id, b_id)
end

-- Adds the pairs of `popped` from pair `first` on to pending's adds
-- `adds` (score, id pairs, made when nil): to put them back. Answers
-- the adds.
local function put_back(adds, popped, first)
  adds = adds or {}
  for i = 2 * first - 1, #popped, 2 do
    adds[#adds + 1] = popped[i + 1]
    adds[#adds + 1] = popped[i]
  end
  return adds
end

-- Refills the rate limit's bucket to now: answers the tokens in it.
local function tokens(c, now)
  fetch(c, {'tokens', 'at'})
  local held, at = tonumber(get(c, 'tokens')) or c.settings.rate_burst, tonumber(get(c, 'at')) or now
  return math.min(c.settings.rate_burst, held + math.max(0, now - at) * c.settings.rate_per_second / 1000)
end

-- Notes the `expiry` entry of job `id` handed out, for the reply.
local function add_expiry_out(c, id, entry)
  local out = c.expiry_out or {}
  out[#out + 1], out[#out + 2] = id, entry
  c.expiry_out = out
end

-- What a take holds while it takes jobs: the ids and records taken, the
-- highest tag taken per class, the expired jobs met and the jobs with an
-- expiry taken (made when first needed, so that a take without any builds
-- no more tables).
local function take(c)
  return {taken = {}, records = {}, last_tags = {}, gone = NONE, claimed = NONE,
    expiring = number(c, 'expiring') > 0}
end

-- Takes job `id` of score `member_score`, out of pending, with its
-- record and its `expiry` entry (false for none): a job of a group at its
-- cap goes back to its group set and does not count; a job whose expiry
-- has come is met (see `finish_take`) and does not count either. Answers
-- the head its group got in its place, {id, score}, or nil; that head
-- goes into pending unless `deferred` (see `refill_head`).
local function take_one(c, t, id, record, member_score, entry, now, deferred)
  local prio, tag = class_and_tag(member_score)
  local group = group_of(record)
  local expired = entry and deadline_of(entry) <= now
  if group and not expired and holds(c, group) then
    withhold(c, id, prio, group, member_score)
    return nil
  end
  if expired then
    if t.gone == NONE then t.gone = {} end
    t.gone[#t.gone + 1] = {id, record, entry}
  else
    t.taken[#t.taken + 1] = id
    t.records[#t.taken] = record
    if entry then
      if t.claimed == NONE then t.claimed = {} end
      t.claimed[#t.claimed + 1] = id
      add_expiry_out(c, id, entry)
    end
    if tag > (t.last_tags[prio] or -1) then t.last_tags[prio] = tag end
  end
  if not group then return nil end
  -- In a claim's pop (`deferred`), a job popped alone reads its group's
  -- jobs in flight and its class's backlog together, for `refill_head`
  -- (a pop of more read them with `fetch_inflight`, so they are known).
  local counted = 'i:' .. group
  if deferred and c.meta[counted] == nil then
    local backlog = fields_of(prio).backlog
    local values = redis.call('HMGET', c.q.meta, counted, backlog)
    c.meta[counted] = values[1]
    if c.meta[backlog] == nil then c.meta[backlog] = values[2] end
  end
  count_waiting(c, group, -1)
  if not expired then
    count_inflight(c, group, 1)
    spend_token(c, group)
  end
  return refill_head(c, group, prio, deferred)
end

-- Ends a take at `now`: the expired jobs met end (see `expire`), up to
-- `c.expiring_budget` a call, then the claims waiting are told to look
-- again; the jobs handed out no longer wait for their deadline (a lease
-- that ends puts them back, see `end_lease`); the classes' virtual times
-- move to the highest tags handed out. Answers the ids and the records of
-- the jobs taken.
local function finish_take(c, t, now)
  if c.settings.max_pending_bytes then
    local left = {unpack(t.taken)}
    for _, job in ipairs(t.gone) do
      left[#left + 1] = job[1]
    end
    leave_waiting(c, left)
  end
  if #t.gone > 0 then
    expire(c, t.gone, now)
    c.expiring_budget = c.expiring_budget - #t.gone
    if c.expiring_budget <= 0 then c.look_again = true end
  end
  if #t.claimed > 0 then redis.call('ZREM', c.q.expiry_due, unpack(t.claimed)) end
  -- A job handed out ages no more (a nack or a lease's end puts it back).
  if c.settings.max_wait_ms and #t.taken > 0 then redis.call('ZREM', c.q.aging, unpack(t.taken)) end
  local fields = {}
  for prio in pairs(t.last_tags) do
    fields[#fields + 1] = fields_of(prio).vtime
  end
  fetch(c, fields)
  for prio, tag in pairs(t.last_tags) do
    advance(c, prio, tag)
  end
  return t.taken, t.records
end

-- Takes up to `wanted` jobs in hand-out order at `now`, counting from
-- `handed` jobs already handed out; plain pops between two floor jobs go
-- in one ZPOPMIN (see `take_one` for the jobs that do not count); the
-- heads a pop's jobs' groups get in their place, and the rest of a pop
-- cut short, go back into pending in one ZADD before the next pop.
-- Answers the ids and the records of the jobs taken.
local function take_jobs(c, wanted, handed, ppm, now)
  local q, t, adds = c.q, take(c), nil
  while #t.taken < wanted and #t.gone < c.expiring_budget do
    if adds then
      redis.call('ZADD', q.pending, unpack(adds))
      adds = nil
    end
    local run = 0
    while run < wanted - #t.taken and not (ppm > 0 and floor_turn(handed + #t.taken + run + 1, ppm)) do
      run = run + 1
    end
    local popped
    if run > 0 then
      popped = redis.call('ZPOPMIN', q.pending, decimal(run))
    else
      run, popped = 1, take_first_of_least_urgent(q) or {}
    end
    if #popped == 0 then break end
    local ids = {}
    for i = 1, #popped, 2 do
      ids[#ids + 1] = popped[i]
    end
    local records = redis.call('HMGET', q.jobs, unpack(ids))
    if #ids > 1 then fetch_inflight(c, records, popped) end
    local entries = t.expiring and redis.call('HMGET', q.expiry, unpack(ids)) or NONE
    -- A head taken is replaced by its group's next job: pending is not
    -- empty just because a pop came back short.
    local refilled = false
    -- The most urgent head refilled in this pop, and its score.
    local first_refill, first_score = nil, nil
    for i, id in ipairs(ids) do
      local member_score = popped[2 * i]
      -- A group's next job may come before the rest of this pop, as it
      -- would for claims of one job each: the rest go back, and the next
      -- pop takes them in order with it.
      if first_refill and before(first_score, first_refill, tonumber(member_score), id) then
        adds = put_back(adds, popped, i)
        break
      end
      local head = take_one(c, t, id, records[i], member_score, entries[i], now, true)
      if head then
        refilled = true
        adds = adds or {}
        adds[#adds + 1] = head[2]
        adds[#adds + 1] = head[1]
        local head_score = tonumber(head[2])
        if not first_refill or before(head_score, head[1], first_score, first_refill) then
          first_refill, first_score = head[1], head_score
        end
      end
    end
    if #popped / 2 < run and not refilled then break end
  end
  if adds then redis.call('ZADD', q.pending, unpack(adds)) end
  return finish_take(c, t, now)
end

-- Takes, at `now`, up to `wanted` of the jobs `picked` (ids, in the order
-- a sharded queue's claim picked them from the shard's line) that still
-- wait in pending, and no other: a job that landed since the line was
-- read, even among them, is not the part's (it landed after the claim
-- began), and taking it would leave behind a job the claims sharing the
-- read count on this part taking. A picked job gone meanwhile (another
-- claim took it) leaves the part short. A group's next job picked comes
-- into pending when its head is taken before it.
-- Answers the ids and the records of the jobs taken.
local function take_picked(c, wanted, picked, now)
  local q, t = c.q, take(c)
  for id in string.gmatch(picked, '%S+') do
    if #t.taken >= wanted or #t.gone >= c.expiring_budget then break end
    local member_score = redis.call('ZSCORE', q.pending, id)
    if member_score then
      redis.call('ZREM', q.pending, id)
      local entry = t.expiring and redis.call('HGET', q.expiry, id)
      take_one(c, t, id, redis.call('HGET', q.jobs, id), member_score, entry, now)
    end
  end
  return finish_take(c, t, now)
end

-- Reads the section that starts at `at`: per request, where its lease_ms
-- is in ARGV, its request id and worker, and where its acks (id, token,
-- result triples) start and end. Answers those and where the next section
-- starts.
local function read_claims(argv, at)
  local requests, count = {}, int_of(argv[at])
  at = at + 1
  for r = 1, count do
    local n = int_of(argv[at + 5])
    requests[r] = {
      at = at, worker = argv[at + 2], id = argv[at + 3],
      picked = argv[at + 4] ~= '' and argv[at + 4] or nil,
      acks = at + 6, last_ack = at + 5 + 3 * n,
      -- Filled by `claim_all`: its jobs are `count` in the list `jobs`
      -- after its first `from` entries, four entries each: id, record,
      -- token, deadline.
      jobs = NONE, from = 0, count = 0,
    }
    at = at + 6 + 3 * n
  end
  return requests, at
end

-- The field of `claims` that keeps the answer of a claim with a request
-- id, by the id and the worker.
local function claim_field(request)
  return #request.id .. ':' .. request.id .. request.worker
end

-- What a claim with a request id answered, kept until its leases end:
-- "<ack id>=<status>,...;<job id> <token> ..." ({acked = {id = status},
-- jobs = {{id, token}...}}), or nil.
local function recall(c, request)
  local kept = redis.call('HGET', c.q.claims, claim_field(request))
  if not kept then return nil end
  local acks, jobs = string.match(kept, '^([^;]*);(.*)$')
  local recalled = {acked = {}, jobs = {}}
  for id, status in string.gmatch(acks, '([^,=]+)=([^,]+)') do
    recalled.acked[id] = status
  end
  for id, token in string.gmatch(jobs, '(%S+) (%S+)') do
    recalled.jobs[#recalled.jobs + 1] = {id, token}
  end
  return recalled
end

-- Keeps what `request` (with a request id) answered until `until_` (ms):
-- its acks' statuses, with those it recalled, and its jobs.
local function remember(c, request, argv, until_)
  local acked = request.acked or {}
  for n, status in ipairs(request.statuses) do
    acked[argv[request.acks + 3 * (n - 1)]] = status
  end
  local acks, jobs = {}, {}
  for id, status in pairs(acked) do
    acks[#acks + 1] = id .. '=' .. status
  end
  local leased, from = request.jobs, request.from
  for i = from + 1, from + 4 * request.count, 4 do
    jobs[#jobs + 1] = leased[i] .. ' ' .. leased[i + 2]
  end
  local field = claim_field(request)
  redis.call('HSET', c.q.claims, field, table.concat(acks, ',') .. ';' .. table.concat(jobs, ' '))
  redis.call('ZADD', c.q.claims_until, 'GT', ms(until_), field)
end

-- The jobs a repeated claim answered the first time that are still
-- leased under the tokens it gave: id, record, token, deadline each, in
-- one list (their `expiry` entries to `c.expiry_out`).
local function still_leased(c, recalled)
  local jobs = {}
  for _, job in ipairs(recalled.jobs) do
    local id, token = job[1], job[2]
    local lease = redis.call('HGET', c.q.leases, id)
    local deadline = redis.call('ZSCORE', c.q.processing, id)
    if lease and deadline and token_of(lease) == token and retention_of(lease) ~= 'done' then
      local entry = number(c, 'expiring') > 0 and redis.call('HGET', c.q.expiry, id)
      if entry then add_expiry_out(c, id, entry) end
      local n = #jobs
      jobs[n + 1], jobs[n + 2], jobs[n + 3], jobs[n + 4] = id, redis.call('HGET', c.q.jobs, id), token, deadline
    end
  end
  return jobs
end

-- Hands out jobs to the requests `list` (of `requests`), in turn, at
-- `now`: the jobs of every request go in one list, `c.handed`, which
-- each one's `jobs` names with its place in it. `ppm` is the bulk floor in
-- parts per million of jobs handed out. Each job handed out gets a fence:
-- a number above every fence the shard gave before (`fence` in `meta`)
-- and no less than Redis's clock in µs, so that a job's later grant has
-- the higher one, and fences follow the order of the grants, across a
-- queue's shards up to their clocks. Its lease token is `token_prefix` ..
-- '-' .. its fence: a repeated claim answers the same token, and so the
-- same fence.
-- Answers why fewer jobs than asked were handed out and the wait for the
-- next rate limit token.
local function hand_out(c, argv, list, now, ppm, token_prefix, picked)
  local q, wanted = c.q, 0
  for _, request in ipairs(list) do
    wanted = wanted + int_of(argv[request.at + 1])
  end

  -- What the queue's settings let out now.
  local limited, wait_ms, bucket = '', 0, nil
  if c.settings.paused then
    wanted, limited = 0, 'paused'
  end
  if c.settings.max_in_flight and wanted > 0 then
    local free = math.max(0, c.settings.max_in_flight - jobs_in_flight(q))
    if free < wanted then wanted, limited = free, 'max_in_flight' end
  end
  if c.settings.rate_per_second and wanted > 0 then
    bucket = tokens(c, now)
    if math.floor(bucket) < wanted then
      wanted, limited = math.floor(bucket), 'rate_limit'
      wait_ms = math.ceil((wanted + 1 - bucket) * 1000 / c.settings.rate_per_second)
    end
  end

  local handed = number(c, 'floor')
  local taken, records
  if picked then
    taken, records = take_picked(c, wanted, picked, now)
  else
    taken, records = take_jobs(c, wanted, handed, ppm, now)
  end
  if ppm > 0 and #taken > 0 then put(c, 'floor', handed + #taken) end
  local fence = #taken > 0 and math.max(number(c, 'fence') + 1, now * 1000) or 0
  if bucket then
    put(c, 'tokens', bucket - #taken)
    put(c, 'at', now)
  end
  -- Fewer than asked because nothing else waits: no limit is to blame,
  -- unless groups wait for their rate limit's next token: look again then.
  if #taken < wanted then
    limited, wait_ms = '', 0
    if number(c, 'throttled') > 0 then
      local next = redis.call('ZRANGE', group_key(c, '!throttled'), 0, 0, 'WITHSCORES')
      if next[2] then limited, wait_ms = 'rate_limit', math.max(1, tonumber(next[2]) - now) end
    end
  end

  -- The jobs go to the requests in turn, each up to its max_jobs.
  -- Requests of one lease length share their deadline's text.
  local deadlines, leases, next, deadline_of, pair = {}, {}, 1, {}, 0
  local jobs = c.handed or {}
  c.handed = jobs
  local noted = noting(c)
  -- The last job's fence as text, which `fence` keeps (made once: a
  -- number's text costs a sprintf).
  local fence_text
  for _, request in ipairs(list) do
    local at = request.at
    local lease_ms, worker = argv[at], request.worker
    local deadline = deadline_of[lease_ms]
    if not deadline then
      deadline = ms(now + int_of(lease_ms))
      deadline_of[lease_ms] = deadline
    end
    local count = math.min(int_of(argv[at + 1]), #taken - next + 1)
    request.jobs, request.from, request.count = jobs, #jobs, count
    for n = next, next + count - 1 do
      fence_text = decimal(fence + n - 1)
      local id, token = taken[n], token_prefix .. '-' .. fence_text
      local retain = retain_of(records[n])
      pair = pair + 2
      deadlines[pair - 1], deadlines[pair] = deadline, id
      leases[pair - 1] = id
      leases[pair] = token .. (retain > 0 and ('/' .. retain) or '') .. ':' .. worker
      local k = #jobs
      jobs[k + 1], jobs[k + 2], jobs[k + 3], jobs[k + 4] = id, records[n], token, deadline
      if noted then note(c, id, now, 'claimed ' .. fence_text .. ' ' .. worker) end
    end
    next = next + count
  end
  if #taken > 0 then
    put(c, 'fence', fence_text)
    redis.call('ZADD', q.processing, unpack(deadlines))
    redis.call('HSET', q.leases, unpack(leases))
  end
  return limited, wait_ms
end

-- Serves the claim `requests` read by `read_claims`, at `now`: each one's
-- acks, then its jobs. Their ack statuses go at the end of `statuses`,
-- their answers at the end of `out`. A request's acks and its claim are
-- one step: where an ack can change what a claim may take (a group cap,
-- max_in_flight), each request's acks come right before its own claim;
-- elsewhere every request's acks go first and the jobs are handed out
-- together, which no claim can tell apart. A claim with a request id
-- that was answered before (its answer is kept until its leases end)
-- applies no ack it applied before (it answers the status it had), and
-- when it was answered jobs, answers those still leased under its tokens
-- and leases nothing new: a claim whose answer was lost is repeated
-- safely.
local function claim_all(c, argv, requests, now, ppm, token_prefix, statuses, out)
  local serve, acking = {}, false
  for _, request in ipairs(requests) do
    local recalled = request.id ~= '' and recall(c, request)
    -- Per ack: its status recalled, or false to apply it (a request
    -- without acks shares the empty NONE).
    request.known = request.acks <= request.last_ack and {} or NONE
    for i = request.acks, request.last_ack, 3 do
      local status = recalled and recalled.acked[argv[i]] or false
      request.known[#request.known + 1] = status
      if not status then acking, request.applying = true, true end
    end
    if recalled then
      request.acked = recalled.acked
      if #recalled.jobs > 0 then
        request.jobs = still_leased(c, recalled)
        request.count = #request.jobs / 4
      end
    end
    if not (recalled and #recalled.jobs > 0) then
      request.served = true
      serve[#serve + 1] = request
    end
  end
  -- Applies the acks of `list` not recalled, in one go.
  local function ack(list)
    local acks, places = {}, {}
    for _, request in ipairs(list) do
      for n, status in ipairs(request.known) do
        if not status then
          local at = request.acks + 3 * (n - 1)
          acks[#acks + 1], acks[#acks + 2], acks[#acks + 3] = argv[at], argv[at + 1], argv[at + 2]
          places[#places + 1] = {request, n}
        end
      end
    end
    for i, status in ipairs(ack_all(c, acks, 1, #acks, now)) do
      places[i][1].known[places[i][2]] = status
    end
  end
  local limited, wait_ms = '', 0
  if not (acking and (c.settings.group_max_in_flight or c.settings.max_in_flight)) then
    if acking then ack(requests) end
    -- Requests with jobs picked are served each on its own, after those
    -- without, which are served together.
    local free, picking = serve, NONE
    for _, request in ipairs(serve) do
      if request.picked then
        free, picking = {}, {}
        break
      end
    end
    if picking ~= NONE then
      for _, request in ipairs(serve) do
        local list = request.picked and picking or free
        list[#list + 1] = request
      end
    end
    if #free > 0 then limited, wait_ms = hand_out(c, argv, free, now, ppm, token_prefix) end
    for _, request in ipairs(picking) do
      local why, wait = hand_out(c, argv, {request}, now, ppm, token_prefix, request.picked)
      if why ~= '' then limited, wait_ms = why, wait end
    end
  else
    for _, request in ipairs(requests) do
      ack({request})
      if request.served then
        local why, wait = hand_out(c, argv, {request}, now, ppm, token_prefix, request.picked)
        if why ~= '' then limited, wait_ms = why, wait end
      end
    end
  end
  -- The answers in request order, and what a request id keeps of them.
  for _, request in ipairs(requests) do
    request.statuses = request.known
    for _, status in ipairs(request.statuses) do
      statuses[#statuses + 1] = status
    end
    local jobs, from, count = request.jobs, request.from, request.count
    local base = #out
    out[base + 1] = count
    for k = 1, 4 * count do
      out[base + 1 + k] = jobs[from + k]
    end
    if number(c, 'depending') > 0 then
      for i = from + 1, from + 4 * count, 4 do
        local id = jobs[i]
        local after = redis.call('HGET', c.q.after, id)
        if after then
          local deps = c.deps_out or {}
          deps[#deps + 1], deps[#deps + 2] = id, dependencies_of(c.q, id, after)
          c.deps_out = deps
        end
      end
    end
    -- Kept: what applied acks or leased jobs.
    if request.id ~= '' and (request.applying or (request.served and count > 0)) then
      remember(c, request, argv, now + int_of(argv[request.at]))
    end
  end
  return limited, wait_ms
end
