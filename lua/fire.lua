-- fire: enqueues the job of one fire time of a schedule, once fleet-wide.
-- A sweeper saw the schedule due at ARGV[4] and worked out, from its cron
-- pattern, the fire time to run (the latest one not after now: one job
-- for however many were missed) and the next one. The call goes ahead
-- only while the schedule's next fire time is still ARGV[4], so of the
-- instances racing for a fire time exactly one enqueues the job and moves
-- the schedule on; the others change nothing. The job's id,
-- `<name>:<fire time>`, makes a repeat of a fire time add nothing either.
-- In a sharded queue the job's shard is another slot: the fire is then
-- recorded as owed, with the schedule's definition, and the caller makes
-- the job in its shard with `pay`, then clears the debt; a sweeper pays
-- debts left behind.
-- KEYS: LIFE, schedules:due, schedules:runs, schedules:owed
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] the schedule's
--   name, ARGV[4] its fire time seen due (ms), ARGV[5] the fire time to
--   run (ms), ARGV[6] the one after it ('' for none), ARGV[7] the number
--   of shards the caller routed for, ARGV[8] the schedule's definition
--   (recorded with a debt), then an enqueues section of one request of
--   one job (see the enqueue part).
-- Returns: {'STALE'} when the schedule's next fire time is no longer
--   ARGV[4] (fired elsewhere, changed, paused or deleted); {'OWED'} in a
--   sharded queue; else the enqueue's answer: 'OK' and 1 for a job
--   created or the view of the one already known, or
--   'SEQUENCE_EXHAUSTED' with the schedule left due.
-- Errors: SHARDS_CHANGED (see `check_shards`), before any write.

-- Moves a schedule on past the fire time ARGV[5].
local function move_on(q, name, argv)
  if argv[6] == '' then
    redis.call('ZREM', q.due, name)
  else
    redis.call('ZADD', q.due, argv[6], name)
  end
  redis.call('HSET', q.runs, name, argv[5])
end

redis.register_function('fire_' .. VERSION, function(keys, argv)
  local q = queue_of('fire', keys, argv)
  local name = argv[3]
  if tonumber(redis.call('ZSCORE', q.due, name)) ~= tonumber(argv[4]) then return {'STALE'} end
  local enqueues = read_enqueues(argv, 9)
  local c = context(q, enqueues.fields)
  check_shards(c, argv[7])
  local problem = registered(q, c)
  if problem then return {problem} end
  local now = now_ms()
  if tonumber(argv[7]) > 1 then
    redis.call('HSET', q.owed, enqueues.ids[1], ms(now) .. ':' .. argv[8])
    move_on(q, name, argv)
    return {'OWED'}
  end
  c.schedule = name
  local answer = {}
  enqueue_all(c, argv, enqueues, now, answer)
  if answer[1] == 'OK' then move_on(q, name, argv) end
  settle(c)
  return answer
end)
