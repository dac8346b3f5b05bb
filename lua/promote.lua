-- Moves due scheduled jobs to pending, earliest run_at first.
-- ARGV[2] batch size
-- Returns: the number of jobs promoted.
return promote_due(now_ms(), tonumber(ARGV[2]))
