-- outbox: the ended jobs whose dependants elsewhere are still to be told
-- (see lib/deps.lua), oldest first: up to ARGV[1] of them, with up to
-- ARGV[2] of the dependants of each.
-- KEYS: outbox, outbox:due, meta
-- Returns: per job its id, its outcome and result ("<outcome>:<result>")
--   and the list of its dependants ("<queue>/<id>" each).
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'outbox_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('outbox', keys, argv)
    local out = {}
    for _, id in ipairs(redis.call('ZRANGE', q.outbox_due, 0, tonumber(argv[1]) - 1)) do
      local members = redis.call('SRANDMEMBER', dependants_key(q, id), argv[2])
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGET', q.outbox, id) or 'g:'
      out[#out + 1] = members
    end
    return out
  end,
}
