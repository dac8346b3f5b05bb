# Sourced by scripts/lua-instructions and scripts/lua-profile: what both
# need to run benches/lua/cycle.lua inside a redis-server of their own.
# The sourcing script sets `work` (a scratch directory) and `pids` (the
# processes its cleanup stops) before calling these.

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for_redis() {
  for _ in $(seq 600); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "redis-server on port $1 did not answer"
}

# Writes to $work/library.lua the library the prioq binary $1 loads,
# renamed prioq_bench, with the harness appended.
library_of() {
  local port http pid
  port=$(free_port)
  http=$(free_port)
  redis-server --port "$port" --save '' --appendonly no >"$work/redis-$port.log" 2>&1 &
  pids+=($!)
  wait_for_redis "$port"
  "$1" --listen "127.0.0.1:$http" --redis-url "redis://127.0.0.1:$port" >"$work/prioq.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do
    curl -fs -o /dev/null -X POST "127.0.0.1:$http/v1/queues/library/jobs" \
      -H 'content-type: application/json' -d '{"task": "load"}' && break
    sleep 0.1
  done
  kill "$pid"
  redis-cli -p "$port" --raw FUNCTION LIST WITHCODE | sed -n '/^#!lua/,$p' |
    sed -e '1s/name=prioq_[0-9a-f]*/name=prioq_bench/' >"$work/library.lua"
  [ -s "$work/library.lua" ] || die "$1 loaded no library (see $work/prioq.log)"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  cat benches/lua/cycle.lua >>"$work/library.lua"
  keys_of_library
}

# Loads $work/library.lua into the Redis on port $1, or stops naming why
# Redis refused it (a Lua chunk may have at most 200 locals: the harness
# appended to the library counts too).
load_library() {
  local answer
  answer=$(redis-cli -p "$1" -x FUNCTION LOAD REPLACE <"$work/library.lua")
  [ "$answer" = prioq_bench ] || die "Redis refused the library: $answer"
}

# exchange's keys for the queue `bench`, in the order the library in
# $work/library.lua takes them: "{bench}:<field>" for each field its
# QUEUE_OF table names (the key names only need to differ and share the
# hash tag; `meta`, `processing` and `leases` keep the names fresh_queue
# writes).
keys_of_library() {
  local fields
  fields=$(sed -n 's/^  exchange = function(keys, argv) return {\(.*\)} end,$/\1/p' "$work/library.lua" |
    grep -o '[a-z_]* = keys\[' | sed 's/ = keys\[$//')
  [ -n "$fields" ] || die "no key table for exchange in $work/library.lua"
  keys=()
  for field in $fields; do
    keys+=("{bench}:$field")
  done
}

# Empties the redis-server on port $1 and lists the queue `bench` as
# prioq lists a queue before its first write, with $work/library.lua's
# functions.
# The version the functions of $work/library.lua are registered under.
library_version() {
  sed -n "s/^local VERSION = '\(.*\)'/\1/p" "$work/library.lua"
}

fresh_queue() {
  local version
  version=$(library_version)
  redis-cli -p "$1" FLUSHALL >/dev/null
  # (meta, processing, leases, groups: a library of an older version takes
  # the first ones only.)
  local listing=(4 "{bench}:meta" "{bench}:processing" "{bench}:leases" "{bench}:groups")
  redis-cli -p "$1" FCALL "listing_$version" "${listing[@]}" begin bench >/dev/null
  redis-cli -p "$1" FCALL "listing_$version" "${listing[@]}" confirm bench >/dev/null
}
