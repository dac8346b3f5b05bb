-- register: puts a queue in the list of queues, unless the list holds the
-- most queues prioq allows already. Touches only the list, which is in no
-- queue's slot.
-- KEYS: queues
-- ARGV[1] the queue's name, ARGV[2] the most queues
-- Returns: 1
-- Errors: LIMIT_REACHED when the queue is not listed and the list is full;
--   before any write.
redis.register_function('register_' .. VERSION, function(keys, argv)
  local q = queue_of('register', keys, argv)
  if redis.call('SISMEMBER', q.queues, argv[1]) == 1 then return 1 end
  if redis.call('SCARD', q.queues) >= tonumber(argv[2]) then fail('LIMIT_REACHED') end
  redis.call('SADD', q.queues, argv[1])
  return 1
end)
