-- nack: ends a lease without success: attempts + 1, then back to pending
-- behind the jobs already waiting in its class (of its group), to
-- scheduled after a delay (or its backoff), or to the DLQ when asked or
-- when its attempts are used up; a job whose cancel was asked ends
-- cancelled instead.
-- KEYS: LIFE
-- ARGV[1] wake channel, ARGV[2] group key prefix, ARGV[3] id, ARGV[4]
--   lease token, ARGV[5] delay_ms ('' for the job's backoff), ARGV[6] '1'
--   to dead-letter, ARGV[7] new priority ('' keeps it), ARGV[8] '1' when
--   ARGV[9] is an error text, ARGV[9] error text
-- Returns: the job's view.
-- Errors: NOT_FOUND, LEASE_LOST, SEQUENCE_EXHAUSTED
redis.register_function{
  function_name = 'nack_' .. VERSION,
  flags = {'allow-oom'},
  callback = function(keys, argv)
    local q = queue_of('nack', keys, argv)
    local id = argv[3]
    local lease, problem = current_lease(q, id, argv[4])
    if not lease then fail(problem) end
    local c, now = context(q), now_ms()
    local error = argv[8] == '1' and argv[9] or nil
    local record, cancel = redis.call('HGET', q.jobs, id), redis.call('HGET', q.cancels, id)
    if not end_lease(c, id, now, tonumber(argv[5]), argv[6] == '1', tonumber(argv[7]), error, 'nacked') then
      fail('SEQUENCE_EXHAUSTED')
    end
    settle(c)
    -- A job whose cancel was asked ends cancelled, removed when it is not
    -- kept: answered as it was then.
    return view(q, id) or job_reply(id, record, 'cancelled', ms(now), false, false, false, false, false, cancel)
  end,
}
