-- Appended to prioq's library by scripts/lua-instructions, never loaded by
-- prioq: calls `exchange` from inside Redis as the group commit would, so
-- that the instructions Redis spends per job can be counted (valgrind's
-- callgrind counts the same for the same code, whatever else the machine
-- does). Each round: a call enqueueing N jobs (priorities 1 to 10 in
-- turn, 200 bytes of args), a call of N claims of one job each, and a call
-- acking the N jobs claimed.
-- bench_cycle: ARGV[1] rounds, ARGV[2] N, ARGV[3] the named groups the
--   jobs spread over (none: no group). Returns the jobs the last round
--   acked.
-- bench_harness: the same rounds with the calls left out, to take the
--   harness's own instructions out.
-- bench_part: ARGV[1] rounds, ARGV[2] N, ARGV[3] 'enqueue', 'claim' or
--   'ack', ARGV[4] 'harness' to leave the calls out, ARGV[5] the groups
--   as bench_cycle's ARGV[3]: rounds of that one
--   call alone (enqueue fills the queue, claim takes from it and keeps
--   the leases, ack acks those kept), so that each part is counted on
--   its own.
-- bench_settings: KEYS[1] the queue's `meta`, ARGV pairs of setting
--   field and value: sets them as `configure` does (the fields and their
--   pack).
-- bench_noop: returns at once what an empty `exchange` call returns, for
--   scripts/lua-instructions --fixed to count a call's fixed cost against.

-- The harness's state and helpers, in one table: the library leaves a
-- few of the 200 locals a Lua chunk may have. `ids` counts the jobs made;
-- `groups` is the named groups the jobs spread over (job n's is
-- g<n mod groups>), 0 for jobs without one: the caller's argument, set on
-- every call.
local bench = {ids = 0, groups = 0, extra = {}, kept = {}}

-- The arguments a job takes beyond the first eight (`bench.extra`):
-- `PER_JOB`, from lua/lib/enqueue.lua, of the library this is appended to
-- (8 before expiry, 9 with it, 10 with dedup keys, 11 with dependencies,
-- 12 with backoffs), left empty.
for i = 1, PER_JOB - 8 do
  bench.extra[i] = ''
end

-- The arguments of one `exchange` call: the acks of `acking` (id, token
-- pairs), `enqueues` fresh jobs, `claims` claims of one job.
function bench.argv(acking, enqueues, claims, body)
  local a = {'wake', 'group:', '100', '100000', 'bench', '1', tostring(#acking)}
  for _, lease in ipairs(acking) do
    a[#a + 1], a[#a + 2], a[#a + 3] = lease[1], lease[2], ''
  end
  a[#a + 1] = tostring(enqueues)
  for _ = 1, enqueues do
    bench.ids = bench.ids + 1
    local group = bench.groups > 0 and ('g' .. bench.ids % bench.groups) or ''
    local job = {'1', 'bench' .. bench.ids, tostring(1 + bench.ids % 10), '0', '5', group, '', body, ''}
    for _, v in ipairs(job) do
      a[#a + 1] = v
    end
    for _, v in ipairs(bench.extra) do
      a[#a + 1] = v
    end
  end
  a[#a + 1] = tostring(claims)
  for _ = 1, claims do
    for _, v in ipairs({'60000', '1', 'worker', '', '', '0'}) do
      a[#a + 1] = v
    end
  end
  return a
end

-- The leases a claim's reply holds, as {id, token} pairs.
function bench.leases(reply)
  local leases, out, i = {}, reply[4], 1
  while i <= #out do
    local n = out[i]
    i = i + 1
    for _ = 1, n do
      leases[#leases + 1] = {out[i], out[i + 2]}
      i = i + 4
    end
  end
  return leases
end

function bench.rounds(keys, argv, call)
  local rounds, n = tonumber(argv[1]), tonumber(argv[2])
  local body = string.rep('x', 200)
  local leases = {}
  for _ = 1, rounds do
    call(keys, bench.argv({}, n, 0, body))
    leases = bench.leases(call(keys, bench.argv({}, 0, n, body)))
    call(keys, bench.argv(leases, 0, 0, body))
  end
  return #leases
end

redis.register_function('bench_cycle', function(keys, argv)
  bench.groups = tonumber(argv[3]) or 0
  return bench.rounds(keys, argv, exchange)
end)

redis.register_function('bench_harness', function(keys, argv)
  bench.groups = tonumber(argv[3]) or 0
  local fake = {}
  for i = 1, tonumber(argv[2]) do
    for _, v in ipairs({1, 'bench' .. i, '', 'bench-' .. i, '0'}) do
      fake[#fake + 1] = v
    end
  end
  return bench.rounds(keys, argv, function() return {0, {}, {}, fake} end)
end)

redis.register_function('bench_part', function(keys, argv)
  local rounds, n, part, harness = tonumber(argv[1]), tonumber(argv[2]), argv[3], argv[4] == 'harness'
  bench.groups = tonumber(argv[5]) or 0
  local body = string.rep('x', 200)
  local call, fake = exchange, {}
  if harness then
    for i = 1, n do
      for _, v in ipairs({1, 'bench' .. i, '', 'bench-' .. i, '0'}) do
        fake[#fake + 1] = v
      end
    end
    call = function() return {0, {}, {}, fake} end
  end
  for _ = 1, rounds do
    if part == 'enqueue' then
      call(keys, bench.argv({}, n, 0, body))
    elseif part == 'claim' then
      local kept = harness and {} or bench.kept
      for _, lease in ipairs(bench.leases(call(keys, bench.argv({}, 0, n, body)))) do
        kept[#kept + 1] = lease
      end
    else
      local acking = {}
      for i = 1, n do
        acking[i] = harness and {'bench' .. i, 'bench-' .. i} or table.remove(bench.kept)
      end
      call(keys, bench.argv(acking, 0, 0, body))
    end
  end
  return #bench.kept
end)

redis.register_function('bench_settings', function(keys, argv)
  redis.call('HSET', keys[1], unpack(argv))
  renew_packed(keys[1])
end)

redis.register_function('bench_noop', function()
  return {0}
end)
