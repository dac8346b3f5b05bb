-- exchange: applies the acks, enqueues and claims that reached one
-- instance for one queue together, in that order, and answers each request
-- as it would have been answered alone: acks only remove leased jobs,
-- enqueues only add, and claims only take pending jobs, so the requests
-- that were all in flight at once may go in any order. One call, one read
-- of the queue's state and one write of it, whatever the mix (see the ack,
-- enqueue and claim parts). When the call claims, jobs whose expiry has
-- come are ended first, then due scheduled jobs are promoted.
-- KEYS: LIFE, CLAIMS
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] how many due
--   scheduled jobs to promote at most (and expired jobs to end, before
--   and during the claims), ARGV[4] bulk floor in parts per million of
--   jobs handed out, ARGV[5] lease token prefix, ARGV[6] the number of
--   shards the caller routed for, then the acks' section, the enqueues'
--   and the claims'.
-- Returns: {now, the acks' answers (the claims' acks after the others),
--   the enqueues' answers, the claims' answers, why the claims got fewer
--   jobs than asked, ms until the next rate limit token, jobs expired,
--   the `expiry` entries of the jobs handed out that have one (id, entry
--   pairs), the dependencies of those that have some (id and
--   `dependencies_of` pairs), the jobs it ended that have dependants
--   elsewhere to tell (see lib/deps.lua)}; each part's answers one request
--   after the other in one flat list, nil when empty (see `listed`); the
--   values at the end that hold their defaults (nil, '', 0) left out.
-- Errors: SHARDS_CHANGED (see `check_shards`), before any write.
-- `drain` is the same function for calls that enqueue nothing: it frees
-- memory or keeps it level, so it runs while Redis is out of memory
-- (allow-oom), and workers can drain a queue that filled Redis; a call
-- that enqueues is refused then, before it runs.
local function exchange(keys, argv)
  local q = queue_of('exchange', keys, argv)
  local now = now_ms()
  local first_ack, last_ack, at = read_acks(argv, 7)
  local enqueues
  enqueues, at = read_enqueues(argv, at, now)
  local claims = read_claims(argv, at)

  -- A call that neither acks nor claims reads only the basic state.
  local c = context(q, enqueues.fields, first_ack > last_ack and #claims == 0)
  check_shards(c, argv[6])
  local statuses = ack_all(c, argv, first_ack, last_ack, now)
  local enqueued, claimed, limited, wait_ms = {}, {}, '', 0
  enqueue_all(c, argv, enqueues, now, enqueued)
  if #claims > 0 then
    local limit = int_of(argv[3])
    expire_due(c, now, limit)
    c.expiring_budget = limit
    promote_due(c, now, limit)
    promote_aged(c, now, limit)
    limited, wait_ms = claim_all(c, argv, claims, now, int_of(argv[4]), argv[5], statuses, claimed)
  end
  settle(c)
  -- The values at the end that hold their defaults are left out: most
  -- calls end in them, and prioq's Redis client parses each value it is
  -- sent at a cost.
  if c.expired or c.expiry_out or c.deps_out or c.outboxed then
    return {now, listed(statuses), listed(enqueued), listed(claimed), limited, wait_ms, c.expired or 0,
      c.expiry_out or false, c.deps_out or false, c.outboxed or 0}
  elseif limited ~= '' or wait_ms ~= 0 then
    return {now, listed(statuses), listed(enqueued), listed(claimed), limited, wait_ms}
  elseif #claimed > 0 then
    return {now, listed(statuses), listed(enqueued), claimed}
  elseif #enqueued > 0 then
    return {now, listed(statuses), enqueued}
  elseif #statuses > 0 then
    return {now, statuses}
  end
  return {now}
end

redis.register_function('exchange_' .. VERSION, exchange)

redis.register_function{
  function_name = 'drain_' .. VERSION,
  flags = {'allow-oom'},
  callback = exchange,
}
