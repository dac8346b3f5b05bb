-- Returns a dead job to pending with its attempts reset, at the tail of its
-- class (or of another class).
-- ARGV[2] id  ARGV[3] new priority ('' keeps it)
-- Returns: the job's view.
-- Errors: NOT_FOUND; CONFLICT when the job is not dead
local id = ARGV[2]
local record = redis.call('HGET', JOBS, id)
if not record then fail('NOT_FOUND') end
reserve_arrivals(1)
if redis.call('ZREM', DEAD, id) == 0 then fail('CONFLICT') end
local job = decode(record)
job.attempts = 0
job.prio = tonumber(ARGV[3]) or job.prio
make_pending(id, job, now_ms())
return view(id)
