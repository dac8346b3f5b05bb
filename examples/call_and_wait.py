#!/usr/bin/env python3
"""Call and wait: enqueue a job and wait for its result, on the Python
client (clients/python, package prioq_client).

The job is enqueued with a client id and a retention (retain_ms), so that
once a worker acks it, prioq keeps it `completed` with the worker's result
for that long. The producer then reads the job with wait_ms, which answers
as soon as the job is completed or dead, whichever instance acked it.

Safe to run again after a crash or a lost answer: the same id finds the
same job (enqueue answers 200 with it while it is kept), never a second one.
The enqueue goes through the client's producer helper, which waits out a
full queue (429 `queue_full`) and an outage.

    pip install ./clients/python
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
import uuid

import httpx
from prioq_client import AuthenticatedClient, Client, producer
from prioq_client.api.jobs import job
from prioq_client.models import EnqueueRequest, JobView, StateName
from prioq_client.types import Unset
from prioq_client.worker import Refused, Unavailable

RETAIN_MS = 3_600_000  # the result stays readable (and the id taken) for an hour
WAIT_MS = 20_000  # the longest one read waits


def main():
    if len(sys.argv) < 3 or not os.environ.get("PRIOQ_URL"):
        sys.exit(__doc__)
    queue, task = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    job_id = sys.argv[4] if len(sys.argv) > 4 else uuid.uuid4().hex
    token = os.environ.get("PRIOQ_TOKEN")
    deadline = time.monotonic() + float(os.environ.get("PRIOQ_TIMEOUT_S", "300"))
    # Long enough for a read that waits WAIT_MS.
    timeout = httpx.Timeout(WAIT_MS / 1000 + 10)
    url = os.environ["PRIOQ_URL"]
    client = (
        AuthenticatedClient(base_url=url, token=token, timeout=timeout)
        if token
        else Client(base_url=url, timeout=timeout)
    )

    body = EnqueueRequest(task=task, args=args, id=job_id, retain_ms=RETAIN_MS)
    # The same id on every try: at most one job comes of it. A full queue
    # (429 queue_full) or an outage is waited out until the deadline.
    try:
        made = producer.enqueue(client, queue, body, give_up_after_s=max(0.0, deadline - time.monotonic()))
    except Refused as error:
        if error.code != "queue_full":
            sys.exit(f"call: enqueue refused: {error}")
        print(f"call: {queue} stayed full; {job_id} was not enqueued", file=sys.stderr)
        sys.exit(2)
    except Unavailable as error:
        print(f"call: prioq stayed unavailable ({error}); {job_id} may be enqueued", file=sys.stderr)
        sys.exit(2)
    print(f"{'enqueued' if made.created else 'found'} {job_id}", file=sys.stderr)

    while time.monotonic() < deadline:
        try:
            response = job.sync_detailed(queue, job_id, client=client, wait_ms=WAIT_MS)
        except (httpx.HTTPError, ValueError):
            time.sleep(1)
            continue
        if response.status_code == 404:
            sys.exit(f"call: {job_id} is gone (deleted, or acked by a worker without retention)")
        found = response.parsed
        if not isinstance(found, JobView):
            time.sleep(1)
            continue
        if found.state == StateName.COMPLETED:
            print(json.dumps(None if isinstance(found.result, Unset) else found.result))
            return
        if found.state == StateName.DEAD:
            print(f"call: {job_id} died: {found.last_error}", file=sys.stderr)
            sys.exit(1)
        if not isinstance(found.progress, Unset) and found.progress is not None:
            print(f"progress: {json.dumps(found.progress)}", file=sys.stderr)
    print(f"call: {job_id} did not finish in time; it may still run", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
