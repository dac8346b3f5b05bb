-- ready: answers only when Redis runs functions that may write, which it
-- holds back while writes are paused (CLIENT PAUSE WRITE). Touches no key.
-- Returns: 1
-- Errors: none; every outcome is in the reply.
redis.register_function{
  function_name = 'ready_' .. VERSION,
  flags = {'allow-oom'},
  callback = function()
    return 1
  end,
}
