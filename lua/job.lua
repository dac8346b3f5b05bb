-- Reads one job in any state.
-- ARGV[2] id
-- Returns: the job's view, or nil when it is unknown.
return view(ARGV[2])
