-- cancel: cancels a job. A waiting job (pending, scheduled, in its group
-- set) ends `cancelled` at once: kept for its retention, else removed. A
-- processing job gets a cancel request (its `cancels` entry): its extends
-- answer that a cancel was asked, and it ends `cancelled` on its ack (its
-- result kept), its nack or its lease's end, never delivered again. A job
-- already cancelled answers as it is.
-- KEYS: LIFE
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] id, ARGV[4] the
--   reason ('' for none)
-- Returns: the job's view (for a job cancelled and removed, as it was
--   when it ended).
-- Errors: NOT_FOUND; CONFLICT when the job is completed or dead
redis.register_function{
  function_name = 'cancel_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('cancel', keys, argv)
    local id = argv[3]
    local record = redis.call('HGET', q.jobs, id)
    if not record then fail('NOT_FOUND') end
    local cancelled = redis.call('HEXISTS', q.cancels, id) == 1
    if redis.call('ZSCORE', q.completed, id) then
      if cancelled then return view(q, id) end
      fail('CONFLICT')
    end
    if redis.call('ZSCORE', q.dead, id) then fail('CONFLICT') end
    local c, now, entry = context(q), now_ms(), ':' .. argv[4]
    if not cancelled then
      redis.call('HSET', q.cancels, id, entry)
      add(c, 'cancelling', 1)
    end
    if not redis.call('ZSCORE', q.processing, id) then
      take_out(c, id, record)
      end_cancelled(c, id, record, now)
    end
    settle(c)
    return view(q, id) or job_reply(id, record, 'cancelled', ms(now), false, false, false, false, false, entry)
  end,
}
