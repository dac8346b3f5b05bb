-- The ack part of `exchange`: acknowledges finished jobs; each one with its
-- current lease token is deleted with everything kept about it (see
-- `ack_all`).
-- Its section of ARGV: the number of acks, then per ack an id, a lease
-- token and a result (JSON, '' for none). The claims' acks come after
-- these.
-- Answers one status per ack, the claims' after these: 'OK', 'LEASE_LOST'
-- (the token is not the job's current lease) or 'NOT_FOUND' (no such
-- job).
-- Errors: none; every outcome is in the reply.

-- Reads the section that starts at `at`: answers where its acks (id,
-- token, result triples, left in ARGV) start and end, and where the next
-- section starts.
local function read_acks(argv, at)
  local last = at + 3 * int_of(argv[at])
  return at + 1, last, last + 1
end
