-- groups: pages through the named groups with jobs waiting or processing,
-- most jobs waiting first; ties by group, descending.
-- KEYS: groups, meta, weights
-- ARGV[1] page size
-- ARGV[2] cursor: jobs waiting of the last group of the previous page ('' for the first page)
-- ARGV[3] cursor: that group
-- Returns: {total, {{group, waiting, processing, weight}...}} with up to
--   page size + 1 groups; the extra one only tells that another page exists.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'groups_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('groups', keys, argv)
    local out, wanted = {}, tonumber(argv[1]) + 1
    -- One more than wanted, in case the mark is among them.
    for _, entry in ipairs(page_down(q.groups, wanted + 1, tonumber(argv[2]), argv[3])) do
      local group = entry[1]
      if group ~= MARK and #out < wanted then
        out[#out + 1] = {
          group, tonumber(entry[2]), tonumber(redis.call('HGET', q.meta, 'i:' .. group) or '0'),
          tonumber(redis.call('HGET', q.weights, group) or '1'),
        }
      end
    end
    return {groups_listed(q), out}
  end,
}
