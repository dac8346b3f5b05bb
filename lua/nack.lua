-- Ends a lease without success: attempts + 1, then back to pending behind
-- the jobs already waiting in its class, to scheduled after a delay, or to
-- the DLQ when asked or when its attempts are used up.
-- ARGV[2] id  ARGV[3] lease token  ARGV[4] delay_ms  ARGV[5] '1' to dead-letter
-- ARGV[6] new priority ('' keeps it)  ARGV[7] '1' when ARGV[8] is an error text
-- ARGV[8] error text
-- Returns: the job's view.
-- Errors: NOT_FOUND, LEASE_LOST
local id = ARGV[2]
local lease, problem = current_lease(id, ARGV[3])
if not lease then fail(problem) end
reserve_arrivals(1)
if ARGV[7] == '1' then redis.call('HSET', ERRORS, id, ARGV[8]) end
end_lease(id, now_ms(), tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6]))
return view(id)
