#!/usr/bin/env python3
"""Call and wait: enqueue a job and wait for its result, standard library only.

The job is enqueued with a client id and a retention (retain_ms), so that
once a worker acks it, prioq keeps it `completed` with the worker's result
for that long. The producer then reads the job with wait_ms, which answers
as soon as the job is completed or dead, whichever instance acked it.

Safe to run again after a crash or a lost answer: the same id finds the
same job (enqueue answers 200 with it while it is kept), never a second one.

    PRIOQ_URL=http://127.0.0.1:8080 python3 examples/call_and_wait.py reports render '{"page": 1}'

Arguments: queue, task, args as JSON (default {}), and an id (default: a
new one). Environment: PRIOQ_URL (required), PRIOQ_TOKEN (an API token,
when prioq runs with PRIOQ_API_TOKENS), PRIOQ_TIMEOUT_S (how long to wait
in all, default 300).

Prints the result and exits 0 when the job completed; prints the last
error and exits 1 when it died; exits 2 when the time is up.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

RETAIN_MS = 3_600_000  # the result stays readable (and the id taken) for an hour
WAIT_MS = 20_000  # the longest one read waits


def request(method, url, token, body=None, timeout=30):
    """Sends one request; answers (status, decoded body)."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        try:
            return error.code, json.loads(error.read() or b"null")
        except ValueError:
            return error.code, None


def main():
    if len(sys.argv) < 3 or not os.environ.get("PRIOQ_URL"):
        sys.exit(__doc__)
    queue, task = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    job_id = sys.argv[4] if len(sys.argv) > 4 else uuid.uuid4().hex
    token = os.environ.get("PRIOQ_TOKEN")
    deadline = time.monotonic() + float(os.environ.get("PRIOQ_TIMEOUT_S", "300"))
    base = f"{os.environ['PRIOQ_URL'].rstrip('/')}/v1/queues/{urllib.parse.quote(queue, safe='')}"

    job = {"id": job_id, "task": task, "args": args, "retain_ms": RETAIN_MS}
    while True:
        try:
            status, body = request("POST", f"{base}/jobs", token, job)
        except (urllib.error.URLError, OSError) as error:
            status, body = 0, {"detail": str(error)}
        if status in (200, 201):
            break
        if status not in (0, 502, 503, 504) or time.monotonic() > deadline:
            sys.exit(f"call: enqueue answered {status}: {body}")
        time.sleep(1)  # the same id again: at most one job comes of it
    print(f"{'enqueued' if status == 201 else 'found'} {job_id}", file=sys.stderr)

    url = f"{base}/jobs/{urllib.parse.quote(job_id, safe='')}?wait_ms={WAIT_MS}"
    while time.monotonic() < deadline:
        try:
            status, body = request("GET", url, token, timeout=WAIT_MS / 1000 + 10)
        except (urllib.error.URLError, OSError):
            time.sleep(1)
            continue
        if status == 404:
            sys.exit(f"call: {job_id} is gone (deleted, or acked by a worker without retention)")
        if status != 200:
            time.sleep(1)
            continue
        if body["state"] == "completed":
            print(json.dumps(body["result"]))
            return
        if body["state"] == "dead":
            print(f"call: {job_id} died: {body['last_error']}", file=sys.stderr)
            sys.exit(1)
        if body.get("progress") is not None:
            print(f"progress: {json.dumps(body['progress'])}", file=sys.stderr)
    print(f"call: {job_id} did not finish in time; it may still run", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
