-- schedules: reads one of a queue's schedules, or a page of them by name.
-- A page costs O(S log S) for the queue's S schedules, which are few (at
-- most PRIOQ_MAX_SCHEDULES).
-- KEYS: schedules, schedules:due, schedules:runs
-- ARGV[1] a schedule's name, or '' for a page; for a page, ARGV[2] the
--   page size and ARGV[3] the name the page starts after ('' for the
--   first page)
-- Returns: {now, {per schedule its name, definition, next fire time
--   (false while paused) and last fire time (false before the first)}},
--   with up to page size + 1 schedules; the extra one only tells that
--   another page exists.
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'schedules_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('schedules', keys, argv)
    local out = {}
    local function add(name, definition)
      out[#out + 1] = name
      out[#out + 1] = definition
      out[#out + 1] = redis.call('ZSCORE', q.due, name)
      out[#out + 1] = redis.call('HGET', q.runs, name)
    end
    if argv[1] ~= '' then
      local definition = redis.call('HGET', q.schedules, argv[1])
      if definition then add(argv[1], definition) end
      return {now_ms(), out}
    end
    local names = redis.call('HKEYS', q.schedules)
    table.sort(names, bytes_before)
    local size, after, listed = tonumber(argv[2]), argv[3], 0
    for _, name in ipairs(names) do
      if listed > size then break end
      if after == '' or bytes_before(after, name) then
        add(name, redis.call('HGET', q.schedules, name))
        listed = listed + 1
      end
    end
    return {now_ms(), out}
  end,
}
