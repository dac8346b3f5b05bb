-- configure: changes a queue's settings (a merge patch, already checked
-- field by field) and wakes the claims waiting on it, which look again
-- under the new settings.
-- KEYS: meta, weights, aging, sizes
-- ARGV[1] wake channel, ARGV[2] number of settings changes, then pairs of
--   field, value ('' to reset the field); then '1' to clear every weight
--   first ('0' not to), the number of weight changes, and pairs of group,
--   weight ('' to drop it); then the mode: 'wake' to write and wake the
--   claims waiting on the queue, 'write' to write only (a sharded queue's
--   other shards, written before the home, whose call wakes them), 'check'
--   to check the change and write nothing
-- Returns: what `settings` returns, after the change (before it, checked).
-- Errors: INVALID <field> when the result is not a valid setting: the
--   fields of an object are set together or not at all (TOGETHER, from the
--   settings' table); at most MAX_WEIGHTS weights.

redis.register_function('configure_' .. VERSION, function(keys, argv)
  local q = queue_of('configure', keys, argv)
  local settings, weights = q.meta, q.weights
  local changes, at = {}, 3
  for _ = 1, tonumber(argv[2]) do
    changes[argv[at]] = argv[at + 1]
    at = at + 2
  end
  local clear = argv[at] == '1'
  local weight_changes, count = {}, tonumber(argv[at + 1])
  at = at + 2
  for _ = 1, count do
    weight_changes[#weight_changes + 1] = {argv[at], argv[at + 1]}
    at = at + 2
  end
  local mode = argv[at]

  -- Checked whole before anything is written.
  local function after(field)
    local change = changes[field]
    if change == nil then return redis.call('HGET', settings, field) end
    return change ~= '' and change or false
  end
  for _, members in ipairs(TOGETHER) do
    local set, unset = nil, nil
    for _, member in ipairs(members) do
      if after(member[1]) then set = member else unset = member end
    end
    if set and unset then fail('INVALID ' .. unset[2]) end
  end
  local weighted = clear and 0 or redis.call('HLEN', weights)
  for _, change in ipairs(weight_changes) do
    local present = not clear and redis.call('HEXISTS', weights, change[1]) == 1
    if change[2] == '' and present then
      weighted = weighted - 1
    elseif change[2] ~= '' and not present then
      weighted = weighted + 1
    end
  end
  if weighted > MAX_WEIGHTS then fail('INVALID group_weights') end
  if mode == 'check' then
    return {settings_of(settings), redis.call('HGETALL', weights)}
  end

  for field, value in pairs(changes) do
    if value == '' then
      redis.call('HDEL', settings, field)
    else
      redis.call('HSET', settings, field, value)
    end
  end
  renew_packed(settings)
  if clear then redis.call('DEL', weights) end
  -- Without max_wait_ms no job ages: the times of those that would go.
  if changes.max_wait_ms == '' then redis.call('DEL', q.aging) end
  -- Without max_pending_bytes no bytes are counted: those counted go, and
  -- a bound set again counts the jobs that enter waiting from then on.
  if changes.max_pending_bytes == '' then
    redis.call('DEL', q.sizes)
    redis.call('HDEL', settings, 'pending_bytes')
  end
  for _, change in ipairs(weight_changes) do
    if change[2] == '' then
      redis.call('HDEL', weights, change[1])
    else
      redis.call('HSET', weights, change[1], change[2])
    end
  end
  -- The fair order's stride: the largest weight.
  local largest = 0
  for _, value in ipairs(redis.call('HVALS', weights)) do
    largest = math.max(largest, tonumber(value))
  end
  if largest > 1 then
    redis.call('HSET', settings, 'max_weight', largest)
  else
    redis.call('HDEL', settings, 'max_weight')
  end
  if mode == 'wake' then redis.call('PUBLISH', q.wake, '') end
  return {settings_of(settings), redis.call('HGETALL', weights)}
end)
