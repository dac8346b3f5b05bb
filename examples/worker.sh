#!/usr/bin/env bash
# A prioq worker in bash, with curl and jq.
#
# It claims one job at a time, extends the job's lease every third of the
# lease while the job runs (a heartbeat, in the background, which also
# carries the task's latest progress report within a second of it), and
# nacks the job with the task's last line of stderr when the task fails.
# When the task succeeds, the ack goes with the next claim, carrying the
# task's result; that claim does not wait (wait_ms 0), so the ack's outcome
# is known at once: a busy worker sends one request per job. When that
# claim finds nothing, the worker long-polls (wait_ms 10000) until a job
# comes. On SIGTERM or Ctrl-C it stops claiming, finishes the job in hand
# (and nacks it, or acks it on its own), and exits 0.
#
#   PRIOQ_URL=http://127.0.0.1:8080 PRIOQ_QUEUE=emails examples/worker.sh
#
# Environment:
#   PRIOQ_URL       prioq's address (required)
#   PRIOQ_QUEUE     the queue to work on (required)
#   PRIOQ_TOKEN     an API token, when prioq runs with PRIOQ_API_TOKENS
#   PRIOQ_LEASE_MS  the lease of each job, default 30000
#   PRIOQ_WORKER    the name shown as the job's worker, default host-pid
#
# Put your own tasks in run_task: it gets the task's name and its args as
# JSON, may show how far it got with `report JSON` and give the job a
# result with `result JSON` (kept while the queue retains completed jobs),
# and fails the job by exiting non-zero.
set -uo pipefail

run_task() {
  local task="$1" args="$2" ms step
  case "$task" in
    echo)
      echo "  echo $args"
      result "$args"
      ;;
    sleep)
      ms="$(jq -r '.ms // 1000' <<<"$args")"
      for step in 1 2 3 4 5 6 7 8 9 10; do
        sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 10000 }')"
        report "{\"slept_ms\": $((ms * step / 10)), \"of_ms\": $ms}"
      done
      result "{\"slept_ms\": $ms}"
      ;;
    fail)
      jq -r ".message // \"task 'fail' always fails\"" <<<"$args" >&2
      return 1
      ;;
    *)
      echo "no task named $task in this worker" >&2
      return 1
      ;;
  esac
}

wait_ms=10000 # long poll: prioq answers as soon as a job is claimable
tries=5       # for an ack or a nack while prioq or Redis is unavailable

for tool in curl jq; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "worker: needs $tool" >&2
    exit 2
  }
done
if [ -z "${PRIOQ_URL:-}" ] || [ -z "${PRIOQ_QUEUE:-}" ]; then
  echo "worker: set PRIOQ_URL (e.g. http://127.0.0.1:8080) and PRIOQ_QUEUE" >&2
  exit 2
fi
lease_ms="${PRIOQ_LEASE_MS:-30000}"
worker="${PRIOQ_WORKER:-${HOSTNAME:-worker}-$$}"
uri() { jq -rn --arg value "$1" '$value | @uri'; }
base="${PRIOQ_URL%/}/v1/queues/$(uri "$PRIOQ_QUEUE")"
beat_seconds="$(awk -v ms="$lease_ms" 'BEGIN { printf "%.3f", ms / 3000 }')"
headers=(-H 'Content-Type: application/json' -H 'Accept: application/json')
[ -z "${PRIOQ_TOKEN:-}" ] || headers+=(-H "Authorization: Bearer $PRIOQ_TOKEN")

# Removed by the worker when it exits; not by an EXIT trap, which a
# background subshell killed at the wrong moment may run too.
work="$(mktemp -d "${TMPDIR:-/tmp}/prioq-worker.XXXXXX")"

# SIGTERM and SIGINT set `stopping`. While the worker only waits (long
# poll, back-off: `idle`), they also end the wait: bash runs a trap at
# once during `wait`, so every wait runs in the background.
stopping=0
idle=0
waiting_on=""
on_signal() {
  stopping=1
  if [ "$idle" = 1 ] && [ -n "$waiting_on" ]; then
    kill "$waiting_on" 2>/dev/null
  fi
}
trap on_signal TERM INT

# Waits for process $1 to end, through any trap that interrupts the wait;
# returns its exit status.
reap() {
  local status
  while :; do
    wait "$1"
    status=$?
    if [ "$status" -gt 128 ] && kill -0 "$1" 2>/dev/null; then
      continue
    fi
    return "$status"
  done
}

# Waits for process $1, which a signal ends while the worker is idle; a
# signal that came before the process started (while the request was
# being made) ends it at once.
wait_on() {
  waiting_on=$1
  if [ "$idle" = 1 ] && [ "$stopping" = 1 ]; then
    kill "$waiting_on" 2>/dev/null
  fi
  reap "$waiting_on"
  waiting_on=""
}

# post PATH BODY SECONDS: POSTs JSON, for at most SECONDS. Sets `status`
# (000 when prioq did not answer) and `answer`.
post() {
  local out="$work/answer.$BASHPID"
  curl -sS --max-time "$3" -o "$out" -w '%{http_code}' -X POST "${headers[@]}" \
    --data-binary "$2" "$base$1" </dev/null >"$out.status" 2>"$out.error" &
  wait_on $!
  status="$(cat "$out.status" 2>/dev/null)"
  [ -n "$status" ] || status=000
  answer="$(cat "$out" 2>/dev/null)"
  rm -f "$out" "$out.status" "$out.error"
}

# Why the last request failed, in one line.
reason() {
  local code detail
  code="$(jq -r '.code // empty' <<<"$answer" 2>/dev/null)"
  detail="$(jq -r '.detail // empty' <<<"$answer" 2>/dev/null)"
  if [ "$status" = 000 ]; then
    echo "no answer from $PRIOQ_URL"
  else
    echo "$status ${code:-error}: $detail"
  fi
}

# Seconds to wait after $1 failures in a row: 0.5, 1, 2 ... 30, with jitter.
backoff() {
  awk -v n="$1" -v seed="$RANDOM" 'BEGIN {
    srand(seed); s = 0.5 * 2 ^ (n - 1); if (s > 30) s = 30
    printf "%.1f", s * (0.5 + rand() / 2) }'
}

# Sleeps $1 seconds, or less when a signal comes.
idle_sleep() {
  sleep "$1" &
  wait_on $!
}

fatal() {
  echo "worker: $*" >&2
  rm -rf "$work"
  exit 1
}

# report JSON: the task's progress, sent with the next heartbeat.
report() {
  jq -c . <<<"$1" >"$work/progress.new" 2>/dev/null && mv "$work/progress.new" "$work/progress"
}

# result JSON: the job's result, sent with its ack.
result() {
  jq -c . <<<"$1" >"$work/result" 2>/dev/null || rm -f "$work/result"
}

# Extends the lease of job $1 (lease token $2) every third of the lease,
# and within a second of a progress report, until the lease is lost. Runs
# in the background and stops by itself if the worker dies. The worker
# ends it with SIGKILL: a subshell that catches a signal right after it
# starts may run the worker's own trap instead of dying. What it leaves
# behind (a sleep, a curl) ends within a beat and holds no output open.
heartbeat() {
  local id="$1" path body progress waited=0 step_ms=$((lease_ms / 3 < 1000 ? lease_ms / 3 : 1000))
  path="/jobs/$(uri "$id")/extend"
  while kill -0 "$$" 2>/dev/null; do
    sleep "$(awk -v ms="$step_ms" 'BEGIN { printf "%.3f", ms / 1000 }')" >/dev/null 2>&1
    waited=$((waited + step_ms))
    progress=""
    if [ -e "$work/progress" ]; then
      progress="$(cat "$work/progress")"
      rm -f "$work/progress"
    elif [ "$waited" -lt $((lease_ms / 3)) ]; then
      continue
    fi
    waited=0
    body="$(jq -nc --arg token "$2" --argjson lease "$lease_ms" --arg progress "$progress" \
      '{lease_token: $token, lease_ms: $lease} + (if $progress == "" then {} else {progress: ($progress | fromjson)} end)')"
    post "$path" "$body" "$beat_seconds"
    case "$status" in
      200) ;;
      404 | 409)
        echo "lease lost on $id ($(reason)): another worker may have it"
        : >"$work/lost"
        exit 0
        ;;
      *) echo "heartbeat for $id failed, retrying: $(reason)" ;;
    esac
  done
}

# finish VERB ID BODY MESSAGE [SENT]: acks or nacks, retrying while prioq
# is unavailable; the same token is safe to resend. SENT: claims that
# carried this ack and may have reached prioq.
finish() {
  local verb="$1" id="$2" body="$3" message="$4" sent="${5:-0}" try
  for try in $(seq "$tries"); do
    post "/jobs/$(uri "$id")/$verb" "$body" 10
    case "$status" in
      200 | 204)
        echo "$message"
        return
        ;;
      404 | 409)
        if [ "$verb" = ack ] && [ $((try + sent)) -gt 1 ] && [ "$status" = 404 ]; then
          echo "$message" # an earlier try went through: the job is done
        else
          echo "dropped $id: $(reason) (the lease ended before the $verb)"
        fi
        return
        ;;
      401) fatal "prioq refused the token ($(reason)); set PRIOQ_TOKEN to a valid API token" ;;
      000 | 5??)
        echo "$verb of $id failed, retrying: $(reason)"
        sleep "$(backoff "$try")"
        ;;
      *) fatal "prioq refused the $verb of $id ($(reason))" ;;
    esac
  done
  echo "gave up on the $verb of $id: the job runs again once its lease runs out"
}

# Runs a job; sets pending_id, pending_token and pending_result when it is
# to be acked.
handle() {
  local job="$1" id task args token attempts beat result=0 error body
  IFS=$'\t' read -r id task token attempts < <(jq -r '[.id, .task, .lease_token, .attempts] | @tsv' <<<"$job")
  args="$(jq -c .args <<<"$job")"
  echo "claimed $id ($task)"
  rm -f "$work/lost" "$work/progress" "$work/result"
  heartbeat "$id" "$token" &
  beat=$!
  run_task "$task" "$args" 2>"$work/task-error" || result=$?
  kill -KILL "$beat" 2>/dev/null
  reap "$beat" 2>/dev/null # not bash's "Killed" line
  if [ -e "$work/lost" ]; then
    echo "dropped $id: lease lost"
  elif [ "$result" = 0 ]; then
    pending_id="$id"
    pending_token="$token"
    pending_result="$(cat "$work/result" 2>/dev/null)"
  else
    error="$(tail -n 1 "$work/task-error" | cut -c 1-2000)"
    [ -n "$error" ] || error="task $task exited with status $result"
    body="$(jq -nc --arg token "$token" --arg error "$error" \
      --argjson delay "$((attempts < 6 ? (1 << attempts) * 1000 : 60000))" \
      '{lease_token: $token, error: $error, delay_ms: $delay}')"
    finish nack "$id" "$body" "nacked $id: $error"
  fi
}

# Reports the outcome of the pending ack from the answer of the claim
# that carried it, the $sent-th claim to do so.
report_ack() {
  local acked code
  IFS=$'\t' read -r acked code < <(jq -r '.acked[0] | [.status, .code // ""] | @tsv' <<<"$answer")
  if [ "$acked" = 204 ] || { [ "$acked" = 404 ] && [ "$sent" -gt 1 ]; }; then
    echo "acked $pending_id" # a 404 on a retry: an earlier try went through
  else
    echo "dropped $pending_id: ${code:-$acked} (the lease ended before the ack)"
  fi
}

# The pending job's ack: id, lease token, and its result when it has one.
ack_entry() {
  jq -nc --arg id "$pending_id" --arg token "$pending_token" --arg result "$pending_result" \
    '{id: $id, lease_token: $token} + (if $result == "" then {} else {result: ($result | fromjson)} end)'
}

echo "worker $worker polling $PRIOQ_QUEUE"
claim="$(jq -nc --arg worker "$worker" --argjson lease "$lease_ms" --argjson wait "$wait_ms" \
  '{worker: $worker, lease_ms: $lease, max_jobs: 1, wait_ms: $wait}')"
pending_id=""     # the job done last: acked with the next claim
pending_token=""  # its lease token
pending_result="" # its result ("" for none)
sent=0           # claims sent that carry it
failures=0
claims=0         # claims made, for their request ids
request_id=""    # the claim's request id, kept while the claim is retried
while [ "$stopping" = 0 ]; do
  if [ -z "$request_id" ]; then
    claims=$((claims + 1))
    request_id="c$$-$RANDOM-$claims"
  fi
  body="$(jq -c --arg id "$request_id" '.request_id = $id' <<<"$claim")"
  if [ -n "$pending_id" ]; then
    # No wait: the ack's outcome comes back at once.
    body="$(jq -c --argjson ack "$(ack_entry)" '.wait_ms = 0 | .ack = [$ack]' <<<"$body")"
    sent=$((sent + 1))
  fi
  # A signal cuts short a claim that waits (a job claimed in that instant
  # goes back to the queue when its lease runs out), not one that carries
  # an ack: that one does not wait, and its ack must not be lost.
  [ -n "$pending_id" ] || idle=1
  post /claim "$body" $((wait_ms / 1000 + 10))
  idle=0
  case "$status" in
    200)
      failures=0
      request_id=""
      if [ -n "$pending_id" ]; then
        report_ack
        pending_id=""
        sent=0
      fi
      job="$(jq -c '.jobs[0] // empty' <<<"$answer")"
      [ -z "$job" ] || handle "$job"
      ;;
    401) fatal "prioq refused the token ($(reason)); set PRIOQ_TOKEN to a valid API token" ;;
    000 | 5??)
      # Then the same claim, request id and ack: a repeat answers the jobs
      # a lost answer leased.
      [ "$stopping" = 0 ] || break
      failures=$((failures + 1))
      pause="$(backoff "$failures")"
      echo "backing off $pause s: $(reason)"
      idle=1
      idle_sleep "$pause"
      idle=0
      ;;
    *) fatal "prioq refused the claim ($(reason)); check PRIOQ_QUEUE and PRIOQ_LEASE_MS" ;;
  esac
done
if [ -n "$pending_id" ]; then
  finish ack "$pending_id" "$(ack_entry | jq -c 'del(.id)')" "acked $pending_id" "$sent"
fi
rm -rf "$work"
echo "stopped"
