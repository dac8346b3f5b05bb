-- listing: records in one shard of a queue that it is listed (its
-- listing, `registered` in `meta`), in two steps around putting the queue
-- on the list of queues: 'begin' writes a token of this registration as
-- the listing, or joins the registration under way (its token), unless
-- the listing is good (1) already; 'confirm' makes the listing good while
-- it is still that token (or good already), and gives the queue its marks
-- (see lib/keys.lua) and the pack of its settings (see lib/meta.lua). A
-- deletion that ran between the steps took the listing away, and the
-- queue may not be listed: then nothing is made good, and the next write
-- finds the queue UNREGISTERED and lists it again. 'abandon' takes the
-- listing away while it is still that token: the queue could not be
-- listed (the limit on queues), and a refused write leaves nothing
-- behind.
-- KEYS: meta, processing, leases, groups
-- ARGV[1] 'begin', 'confirm' or 'abandon', ARGV[2] the token
-- Returns: for 'begin', the listing: 1 when it is good already, else the
--   token to confirm; for 'confirm', 1, or 0 when it found another listing
--   or none; for 'abandon', 1 when it took the listing away, else 0.
-- Errors: none; every outcome is in the reply.
redis.register_function('listing_' .. VERSION, function(keys, argv)
  local q = queue_of('listing', keys, argv)
  local listing = redis.call('HGET', q.meta, 'registered')
  if argv[1] == 'begin' then
    if listing then return listing end
    redis.call('HSET', q.meta, 'registered', argv[2])
    return argv[2]
  end
  if argv[1] == 'abandon' then
    if listing ~= argv[2] then return 0 end
    redis.call('HDEL', q.meta, 'registered')
    return 1
  end
  if listing ~= argv[2] and listing ~= '1' then return 0 end
  redis.call('HSET', q.meta, 'registered', '1')
  give_marks(q)
  renew_packed(q.meta)
  return 1
end)
