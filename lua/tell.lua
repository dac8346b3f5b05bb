-- tell: tells jobs of this slot that a dependency of theirs elsewhere
-- ended (see `tell` in lib/deps.lua): each end counts once, however often
-- it is told, and a job whose last dependency ended is released, one
-- whose dependency failed fails (unless it ignores failures). An end told
-- before its dependant was made waits for it in `after:early`. A queue
-- that is not on the list of queues (deleted) hears nothing.
-- KEYS: LIFE
-- ARGV[1] wake channel, ARGV[2] group key prefix, then per end the
--   dependant's id, the dependency's ref ("<queue>/<id>"), its outcome
--   ('c', 'd', 'x' or 'g') and its result ('' for none)
-- Returns: 1
-- Errors: none; every outcome is in the reply.
redis.register_function('tell_' .. VERSION, function(keys, argv)
  local q = queue_of('tell', keys, argv)
  local c, now = context(q), now_ms()
  -- A queue deleted (or being deleted) has no dependant left to tell.
  if registered(q, c) then return 1 end
  for i = 3, #argv, 4 do
    tell(c, argv[i], argv[i + 1], argv[i + 2], argv[i + 3], now)
  end
  settle(c)
  return 1
end)
