-- prioq's Redis Functions library, its ground: the keys of a queue and
-- what each holds, the score's constants, failing, naming a call's keys,
-- Redis's clock.
--
-- lua/lib/ holds the parts every function shares, by subject, in the
-- order they load: keys (this file), record, meta, fair (the fair order,
-- caps and rates), dedup (who holds a dedup key), transitions, deps
-- (dependencies), pages; then
-- the parts of `exchange` (ack, enqueue, claim). lua/ holds one file per
-- function. The loader
-- (src/queue/store/library.rs) puts `#!lua name=prioq_<version>`, `local
-- VERSION = '<version>'` and the generated tables (each function's keys,
-- the settings) in front of them, and loads the whole once per Redis
-- primary: the helpers are defined at load, not on every call.
--
-- The keys of one queue, all in its hash slot. A function is given the
-- keys of the sets its header names (VIEW: what a job's view reads; LIFE:
-- that and what a job's transitions write; CLAIMS; SCHEDULES: see the
-- keys table in src/queue/store/keys.rs) and the keys it names besides,
-- and builds a table `q` of them by name:
--   pending    zset   claimable jobs: id -> priority + tag * 2^-44
--   scheduled  zset   id -> run_at (ms)
--   processing zset   id -> lease deadline (ms); and MARK -> +inf (see
--                     below), so jobs in flight are counted with
--                     `jobs_in_flight`, never ZCARD
--   dead       zset   id -> dead_at (ms)
--   jobs       hash   id -> record (below)
--   leases     hash   id -> the job's lease: "token:worker" while it is
--                     processing, "token/<retain ms>:worker" when it is
--                     to be kept once acked, "token/done:worker" once it
--                     is completed (the token that completed it); and
--                     MARK -> ''
--   (MARK, from src/queue/store/keys.rs, longer than 64 bytes and no job
--   id, is written when the queue is listed: it keeps `processing` and
--   `groups` skiplists and `leases` a hash table. Redis keeps a small
--   sorted set or hash as a listpack and searches it entry by entry on
--   every write; with 64 jobs in flight that made a job's claim and ack
--   cost a fifth more than with none, and with 100 groups listed each
--   change of a group's count cost 38,000 instructions against 5,000.)
--   completed  zset   id -> the end of its retention (ms), for jobs acked
--                     with retention
--   results    hash   id -> "<completed_at ms>:<result JSON>" of completed
--                     jobs ('' for no result)
--   progress   hash   id -> the latest progress JSON its worker reported
--   schedules  hash   name -> the schedule's definition (JSON, written and
--                     read by prioq, opaque here)
--   schedules:due  zset  name -> the schedule's next fire time (ms), for
--                     schedules not paused
--   schedules:runs hash  name -> its last fire time that made a job (ms)
--   schedules:owed hash  in the home of a sharded queue: job id -> "<ms
--                     owed since>:<schedule definition>" of each fire whose
--                     job is still to be made in its shard (see `fire`)
--   schedules:paid zset  in a shard: job id -> when a fire's job was made
--                     there, kept a day, so a debt is never paid twice
--   expiry     hash   id -> "<deadline ms>" or "<deadline ms>:drop" of
--                     each job enqueued with expires_in_ms, until it ends
--                     (out of the record, so that a record reads the same
--                     to every version of prioq)
--   backoff    hash   id -> "<f|e><delay ms>" of each job enqueued with a
--                     backoff (fixed, or doubling with each failure), until
--                     it ends (out of the record, like `expiry`)
--   expiry:due zset   id -> its deadline (ms), for those of them waiting
--                     (pending or scheduled): a claim and a sweep move
--                     the jobs whose deadline has come out from its front
--   dedup      hash   dedup key -> "<until ms>:<owner id>": the job that
--                     holds the key, and until when it holds it even once
--                     it ended (its enqueue + ttl_ms; see lib/dedup.lua)
--   dedup:of   hash   id -> the key it holds, while it holds one
--   dedup:until zset  key -> its until, for keys whose job ended before
--                     then: the sweeper lets them go
--   cancels    hash   id -> ":<reason>" of a processing job whose cancel
--                     was asked (it ends cancelled with its lease), and of
--                     a cancelled job kept (in `completed`, its result in
--                     `results`: the view says `cancelled`)
--   waiting    zset   id -> enqueued_at (ms), of each job waiting for its
--                     dependencies (state `waiting`; see lib/deps.lua)
--   after      hash   id -> "<d|i> <ref> <ref>...": the dependencies of a
--                     job enqueued with `after` (d: it goes to the DLQ
--                     when one fails, i: failures count as finished),
--                     each ref "<queue>/<id>"; until the job ends
--   after:left hash   id -> its dependencies not finished yet
--   after:done hash   "<id> <ref>" -> "<outcome>:<result>" of each of its
--                     dependencies that finished (outcome c completed,
--                     d dead, x cancelled, g deleted): a dependency is
--                     counted once, however often its end is told
--   after:early zset  "<id> <ref>" -> when the end of a dependency was
--                     told before its dependant was made (its enqueue
--                     registers with the dependency first); the dependant's
--                     enqueue takes it, else the sweeper forgets it
--   outbox     hash   id -> "<outcome>:<result>" of an ended job whose
--                     dependants in other slots are still to be told
--   outbox:due zset   id -> when it ended
--   depended   set    the jobs that have a dependants set (below)
--   sizes      hash   id -> its body's size (bytes), of each job waiting
--                     that entered waiting while the queue had
--                     max_pending_bytes (see `enter_waiting`); empty
--                     without it
--   push       hash   in the home: the queue's push target and its health
--                     (see push.lua)
--   push:slots zset   slot -> when it lapses: the target's deliveries
--                     under way, fleet-wide
--   meta       hash   the queue's small state, read and written at most once
--                     a call:
--                     settings: paused, max_in_flight, rate_per_second,
--                       rate_burst, group_max_in_flight, max_weight (the
--                       largest weight)
--                     floor: jobs handed out, for the bulk floor
--                     tokens, at: the rate limit's bucket
--                     v:<priority>: the class's virtual time, the tag it
--                       last handed out
--                     t:<priority>:<group>: the group's finish tag in the
--                       class ('' is the group of jobs without one)
--                     h:<priority>:<group>: the named group's head: its
--                       job in pending for the class
--                     b:<priority>: jobs of the class waiting in group sets
--                     i:<group>: the named group's jobs processing; i: all
--                       named groups' together
--                     retain_ms: the retention of jobs enqueued without
--                       one (a setting)
--                     progress: the entries in `progress`, so that jobs
--                       ending need not look there when it is empty
--                     expiring: the entries in `expiry`, so that calls
--                       on a queue without any need not look there
--                     backing_off: the entries in `backoff`, likewise
--                     pending_bytes: the sum of `sizes`
--                     keyed: the entries in `dedup:of`, likewise
--                     cancelling: the entries in `cancels`, likewise
--                     depending: the entries in `after`, likewise;
--                       depended: the dependants sets, likewise
--                     w: until when (ms) a wait for a job may be running
--                       on some instance: ended jobs are published then
--                     g:<group>: the named group's rate limit bucket,
--                       "<tokens>:<at ms>"
--                     throttled: the groups in `!throttled`
--                     registered: 1 once the queue is on the list of
--                       queues, in every shard (a token while it is being
--                       put there, see `listing`); deleting: 1 while the
--                       queue is being deleted (see `drop`)
--                     shards: the number of shards the queue is split over
--                       (absent: 1), in every shard; -k while a change
--                       from k is under way (see `reshard`)
--                     arrivals: in the home of a sharded queue, jobs
--                       enqueued so far: their arrival numbers
--                     layout: META_MARK, the mark of `meta`, written with
--                       the marks of `processing`, `leases` and `groups`
--                       (and by the sweeper where it is not, see
--                       `give_marks`): a
--                       value longer than Redis's hash-max-listpack-value
--                       (64 bytes) keeps `meta` a hash table. A small
--                       hash is otherwise kept as a listpack, which
--                       Redis searches field by field, and every call
--                       reads 20 to 40 fields of `meta` (a field not
--                       there costs a scan of all of them)
--   weights    hash   group -> weight, for the groups given one (others
--                     weigh 1)
--   groups     zset   group -> its jobs waiting, for every named group with
--                     jobs waiting or processing; and MARK -> 0, so groups
--                     are counted with `groups_listed`, never ZCARD, and
--                     a read of its members leaves MARK out
-- and, for each named group g, `<group prefix>g`, a zset like pending that
-- holds the group's waiting jobs other than its heads; and
-- `<group prefix>!throttled`, a zset of the named groups held back by the
-- group rate limit: group -> when its bucket holds a token again (ms). No
-- group is named `!throttled`: group names are job ids. Group keys are
-- named from the group inside the functions: they share the queue's hash
-- tag, so they live in the slot of the declared keys.
-- and, for each job with dependants, `<key base>dependants:<id>`, a set of
-- them: "=<id>" for one in this slot, "<queue>/<id>" for one elsewhere
-- (the key base is the queue's key names up to their last part).
-- `q.wake` is the queue's wake-up channel, `<prefix>:{<queue>}:wake`, and
-- `q.group_prefix` the prefix of its group keys (arguments, not keys). Its
-- `done` channel, the same with `done` for `wake`, hears the ids of jobs
-- that ended (acked, dead-lettered, deleted) while a wait may be running.
-- Times are Redis TIME in milliseconds, never an instance's clock.
--
-- Fair order (start-time fair queuing). A job of group g entering class p
-- gets the tag S = max(V[p], F[p:g]), V[p] being the class's virtual time
-- and F[p:g] the group's finish tag, which becomes S + stride / weight. A
-- class serves jobs by tag, so groups with jobs waiting share it in
-- proportion to their weights, and a group's own jobs keep their order.
-- The stride is the largest weight configured (1 when none is): every
-- increment is at least 1, so a group's tags strictly increase in the score; with
-- one group and no weights the tags are 0, 1, 2...: arrival order.
-- A named group has at most one job per class in pending, its head; the
-- rest wait in its group set, and the head is refilled when it is claimed.
-- A group at its cap (group_max_in_flight) has no head: a head met while
-- its group is at the cap goes back to the group set, and heads come back
-- when the group's jobs in flight drop below the cap. A group whose rate
-- limit bucket (group_rate_limit) is empty is held back the same way, and
-- gets its heads back when the bucket holds a token again: a claim (or a
-- sweep) gives them back to the groups of `!throttled` whose time came.
-- Jobs without a group go straight to pending and are not held back by
-- group_max_in_flight or group_rate_limit.
--
-- A record is a header of unsigned varints (7 bits a byte, least
-- significant first, the high bit set on every byte but a number's last):
--   flags, priority, attempts, max_attempts, enqueued_at,
--   ready_at - enqueued_at (when the job last became pending, or its run_at)
-- then, when flags has bit 1, the last error, and when it has bit 2, the
-- group: each its length (varint) and text; when it has bit 4, the
-- retention once acked (ms, varint); when it has bit 8, the name of the
-- schedule that made the job (length and text); then the body, which prioq
-- writes and no function reads: the job's trace when it has one, the
-- task's length in bytes (varint), the task, the args as sent.
--
-- Functions that add to pending may answer SEQUENCE_EXHAUSTED, always
-- before they write anything (see `take_tags`). A Lua error does not undo
-- the writes before it, so every check comes before the first write.

-- A score's fraction holds 2^44 tag units next to an 8-bit priority: 8 + 44
-- bits stay exact in a float64. A score is sent to Redis as the exact hex
-- float prio * SPAN + tag scaled by 2^-44 (strtod reads "0x...p-44"):
-- printing it in decimal takes 17 digits and a multiple-precision
-- conversion, on both sides.
local SPAN_BITS = 44
local SPAN = 2 ^ SPAN_BITS
local SCORE_FORMAT = '0x%xp-' .. SPAN_BITS
local NONE = {}
-- The mark of `meta`, kept in its field `layout` (the field's name stays
-- for the queues older versions listed). Its text names the marks of
-- `processing` and `leases` too: a queue whose `layout` is an older text
-- has no marks yet.
local META_MARK = 'meta is read by many fields a call: this value, over 64 bytes, keeps it a hash table; '
  .. 'processing, leases and groups hold MARK'

-- The names of a class's fields in `meta`, made once per class: a number
-- turned into text costs a call to sprintf each time.
local CLASS_FIELDS = {}

local function fields_of(prio)
  local fields = CLASS_FIELDS[prio]
  if not fields then
    fields = {vtime = 'v:' .. prio, tag = 't:' .. prio .. ':', head = 'h:' .. prio .. ':', backlog = 'b:' .. prio,
      aged = 'k:' .. prio}
    CLASS_FIELDS[prio] = fields
  end
  return fields
end

-- Set by lib/deps.lua, which loads after the transitions it uses: tells
-- the dependants of the jobs a call ended, at `settle`.
local on_ended

local function fail(code)
  error({err = code})
end

-- The tables `q` made for the calls before, by stem and then by the
-- call's first key, each with the number of keys and the last one: a
-- queue's calls name the same keys call after call, and a table of 30-odd
-- fields costs a call about 16,000 instructions to build. One is taken
-- again when the call's first and last keys, their number and its leading
-- arguments are the ones it was made of (Lua keeps one copy of each
-- string: each comparison compares pointers); the rest follow from them,
-- prioq naming every key of a queue's shard from the prefix, the queue
-- and the shard, which the first key holds. Read, never changed. At most
-- `most` are kept (then they start over).
local made_queues = {by_stem = {}, kept = 0, most = 1024}

-- The table `q` of a call of function `stem`: its keys by name, as the
-- loader's QUEUE_OF names them (from the function table in
-- src/queue/store/library.rs), and its leading arguments: the wake-up
-- channel, then the group key prefix.
local function queue_of(stem, keys, argv)
  local n, first = #keys, keys[1]
  local made = made_queues.by_stem[stem]
  local kept = made and made[first]
  if kept and kept.n == n and kept.last == keys[n] then
    local q = kept.q
    if (q.wake == nil or q.wake == argv[1]) and (q.group_prefix == nil or q.group_prefix == argv[2]) then
      return q
    end
  end
  local q = QUEUE_OF[stem](keys, argv)
  if made_queues.kept >= made_queues.most then
    made_queues.by_stem, made_queues.kept, made = {}, 0, nil
  end
  if not made then
    made = {}
    made_queues.by_stem[stem] = made
  end
  if first then
    made[first], made_queues.kept = {q = q, n = n, last = keys[n]}, made_queues.kept + 1
  end
  return q
end

-- The names of the queue's keys up to their last part, from `jobs` or
-- `meta` (a function takes one or the other; both have four letters).
local function key_base(q)
  return string.sub(q.jobs or q.meta, 1, -5)
end

-- The queue's name as dependency refs write it (a shard's keys carry `#n`
-- after it).
local function queue_name(q)
  return string.match(key_base(q), '{([^}#]*)')
end

-- The set of the dependants of job `id`, in the queue's slot.
local function dependants_key(q, id)
  return key_base(q) .. 'dependants:' .. id
end

-- Gives a listed queue's shard its marks (see the keys above): `listing`
-- when it lists the queue, and the sweeper on a pass that finds `meta`'s
-- mark not this text (a queue listed by an older version), so that a pass
-- costs one HGET once they are there.
local function give_marks(q)
  redis.call('HSET', q.meta, 'layout', META_MARK)
  redis.call('ZADD', q.processing, 'NX', 'inf', MARK)
  redis.call('HSETNX', q.leases, MARK, '')
  -- Scored 0, not -inf (which ZCOUNT could leave out as `processing`'s
  -- +inf is): an older version running beside this one reads it as a
  -- group with no jobs waiting, where -inf would fail its reply.
  redis.call('ZADD', q.groups, 'NX', 0, MARK)
end

-- The jobs in flight: the members of `processing` but its mark.
local function jobs_in_flight(q)
  return redis.call('ZCOUNT', q.processing, '-inf', '(+inf')
end

-- The named groups with jobs waiting or processing: the members of
-- `groups` but its mark. O(1).
local function groups_listed(q)
  return redis.call('ZCARD', q.groups) - (redis.call('ZSCORE', q.groups, MARK) and 1 or 0)
end

-- The jobs that wait to be handed out (pending, behind their group's
-- head, scheduled, or waiting for their dependencies): every record but
-- those of jobs processing, completed or dead. O(log N).
local function waiting_jobs(q)
  return redis.call('HLEN', q.jobs) - jobs_in_flight(q) - redis.call('ZCARD', q.completed)
    - redis.call('ZCARD', q.dead)
end

-- A list as a reply holds it: nil when empty. Redis turns each table of a
-- reply into an array after looking in it for the fields of the other
-- reply types (`err`, `ok`, `double`, `map`, ...) and writes the array's
-- length once it has walked it (a place in the reply set aside, then
-- filled): about 3,000 instructions even for an empty one. prioq reads
-- nil as an empty list.
local function listed(list)
  if #list == 0 then return false end
  return list
end

-- Redis's clock in ms. The seconds' text parsed is kept: it changes once
-- a second, and Lua parses a number's text with strtod.
local now_ms
do
  local clock = {seconds = nil, ms = 0}
  now_ms = function()
    local t = redis.call('TIME')
    if t[1] ~= clock.seconds then
      clock.seconds, clock.ms = t[1], tonumber(t[1]) * 1000
    end
    return clock.ms + math.floor(tonumber(t[2]) / 1000)
  end
end

