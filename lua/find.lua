-- find: one step of a search of a shard's jobs, in any state: scans
-- `jobs` from an HSCAN cursor, 100 records a step, until it has looked at
-- `budget` records, found `limit` matches or reached the end; answers the
-- matches' views. A job matches when it passes every filter given
-- (an empty filter passes all): its id contains `id_part`; its task is
-- `task`; its group is `group`; it holds the dedup key `dedup_key`; the
-- top-level `field` of its args is `value` (a string's text, or a number's
-- or boolean's JSON text); its state is `state`. O(budget) a call.
-- KEYS: VIEW
-- ARGV[1] cursor ('0' to start), ARGV[2] budget, ARGV[3] limit,
--   ARGV[4] id_part, ARGV[5] task, ARGV[6] group, ARGV[7] dedup_key,
--   ARGV[8] field, ARGV[9] value, ARGV[10] state
-- Returns: {next cursor ('0' at the end), records looked at, {views}}
-- Errors: none.

-- A job matches the filters `f` (see above). Its helpers, in a block, are
-- not the library's.
local find_matches
do
  -- The task and the args of a record's body (see src/queue/store/record.rs).
  local function task_and_args(body)
    local pos = 1
    if string.byte(body, 1) == 0 then
      local _
      _, pos = read_text(body, 2)
      _, pos = read_text(body, pos)
    end
    local task
    task, pos = read_text(body, pos)
    return task, string.sub(body, pos)
  end

  -- The JSON text of a top-level field of the args, or nil.
  local function field_text(args, field)
    local ok, decoded = pcall(cjson.decode, args)
    if not ok or type(decoded) ~= 'table' then return nil end
    local value = decoded[field]
    if type(value) == 'string' then return value end
    if type(value) == 'number' then
      if value == math.floor(value) and math.abs(value) < 2^53 then return string.format('%d', value) end
      return tostring(value)
    end
    if type(value) == 'boolean' then return tostring(value) end
    return nil
  end

  find_matches = function(q, id, record, f)
    if f.id_part ~= '' and not string.find(id, f.id_part, 1, true) then return false end
    if f.task ~= '' or f.group ~= '' or f.field ~= '' then
      local job = decode(record)
      if f.group ~= '' and job.group ~= f.group then return false end
      if f.task ~= '' or f.field ~= '' then
        local task, args = task_and_args(job.body)
        if f.task ~= '' and task ~= f.task then return false end
        if f.field ~= '' and field_text(args, f.field) ~= f.value then return false end
      end
    end
    if f.dedup_key ~= '' and redis.call('HGET', q.dedup_of, id) ~= f.dedup_key then return false end
    return f.state == '' or state_of(q, id) == f.state
  end
end

redis.register_function{
  function_name = 'find_' .. VERSION,
  flags = {'no-writes'},
  callback = function(keys, argv)
    local q = queue_of('find', keys, argv)
    local cursor, budget, limit = argv[1], tonumber(argv[2]), tonumber(argv[3])
    local f = {
      id_part = argv[4], task = argv[5], group = argv[6], dedup_key = argv[7], field = argv[8],
      value = argv[9], state = argv[10],
    }
    local found, looked = {}, 0
    repeat
      local step = redis.call('HSCAN', q.jobs, cursor, 'COUNT', 100)
      cursor = step[1]
      local entries = step[2]
      for i = 1, #entries, 2 do
        looked = looked + 1
        if find_matches(q, entries[i], entries[i + 1], f) then
          found[#found + 1] = view(q, entries[i])
        end
      end
    until cursor == '0' or looked >= budget or #found >= limit
    return {cursor, looked, found}
  end,
}
