-- Adds jobs to the queue, idempotently by id.
-- ARGV[2] number of jobs, then five ARGV per job:
--   id, priority, delay_ms, max_attempts, body (JSON with task and args)
-- Returns: one {created (1 or 0), view} per job, in order. A job whose id is
--   already known is left as it is and answered with its current view.
local now = now_ms()
reserve_arrivals(tonumber(ARGV[2]))
local out = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  local base = 3 + i * 5
  local id = ARGV[base]
  if redis.call('HEXISTS', JOBS, id) == 1 then
    out[#out + 1] = {0, view(id)}
  else
    local job = {
      prio = tonumber(ARGV[base + 1]), attempts = 0, max = tonumber(ARGV[base + 3]),
      enqueued = now, ready = now, body = ARGV[base + 4],
    }
    local delay = tonumber(ARGV[base + 2])
    if delay > 0 then
      make_scheduled(id, job, now + delay)
      out[#out + 1] = {1, {id, encode(job), 'scheduled', ms(now + delay), false, false}}
    else
      make_pending(id, job, now)
      out[#out + 1] = {1, {id, encode(job), 'pending', false, false, false}}
    end
  end
end
return out
