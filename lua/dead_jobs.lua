-- dead_jobs: pages through the DLQ, most recently dead first; ties in
-- dead_at go by id, descending, as Redis orders them.
-- KEYS: dead, jobs
-- ARGV[1] page size
-- ARGV[2] cursor: dead_at of the last job of the previous page ('' for the first page)
-- ARGV[3] cursor: id of that job
-- Returns: {total, {views...}} with up to page size + 1 views; the extra
--   one only tells that another page exists.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'dead_jobs_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('dead_jobs', keys, argv)
    local out = {}
    for i, entry in ipairs(page_down(q.dead, tonumber(argv[1]) + 1, tonumber(argv[2]), argv[3])) do
      out[i] = job_reply(entry[1], redis.call('HGET', q.jobs, entry[1]), 'dead', entry[2])
    end
    return {redis.call('ZCARD', q.dead), out}
  end,
}
