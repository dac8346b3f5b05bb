-- dependency: answers the state of jobs that jobs elsewhere (another
-- queue, another shard) are to depend on, and with 'add' registers those
-- dependants with the jobs that still live, so that their ends are told
-- to them (see lib/deps.lua). Idempotent.
-- KEYS: jobs, dead, completed, results, cancels, meta, depended
-- ARGV[1] 'check' or 'add', then per job its id and, for 'add', the
--   dependant as its dependants set names it ("<queue>/<id>")
-- Returns: per job "<state>:<result>": state 'l' while it lives, else
--   'c' completed (with its result), 'd' dead, 'x' cancelled, 'g' gone.
-- Errors: none; every outcome is in the reply.
redis.register_function('dependency_' .. VERSION, function(keys, argv)
  local q = queue_of('dependency', keys, argv)
  local adding, step = argv[1] == 'add', argv[1] == 'add' and 2 or 1
  local out = {}
  for i = 2, #argv, step do
    local id = argv[i]
    local outcome, result = outcome_of(q, id)
    if adding and outcome == 'l' then
      local key = dependants_key(q, id)
      if redis.call('SADD', key, argv[i + 1]) == 1 and redis.call('SADD', q.depended, id) == 1 then
        redis.call('HINCRBY', q.meta, 'depended', 1)
      end
    end
    out[#out + 1] = outcome .. ':' .. result
  end
  return out
end)
