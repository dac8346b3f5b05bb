#!/usr/bin/env python3
"""A prioq worker in Python, on the worker helper of the Python client
(clients/python, package prioq_client).

It claims one job at a time, extends the job's lease every third of the
lease while the job runs (a heartbeat, which also carries the task's
latest progress report, at once when the task reports), and nacks the job
with the error when its task raises. When the task returns, the ack goes
with the next claim, carrying what the task returned as the job's result;
that claim does not wait (wait_ms 0), so the ack's outcome is known at
once: a busy worker sends one request per job. When that claim finds
nothing, the worker long-polls (wait_ms 10000) until a job comes.
On SIGTERM or Ctrl-C it stops claiming, finishes the job in hand (and
nacks it, or acks it on its own), and exits 0.

Install the client first (Python 3.11 or later; it brings httpx and attrs),
then run the worker:

    pip install ./clients/python
    PRIOQ_URL=http://127.0.0.1:8080 PRIOQ_QUEUE=emails python3 examples/worker.py

Environment:
    PRIOQ_URL       prioq's address (required)
    PRIOQ_QUEUE     the queue to work on (required)
    PRIOQ_TOKEN     an API token, when prioq runs with PRIOQ_API_TOKENS
    PRIOQ_LEASE_MS  the lease of each job, default 30000
    PRIOQ_WORKER    the name shown as the job's worker, default host-pid

Put your own tasks in TASKS: a task takes the job's args and a `report`
function (call it with any JSON value to show how far the job got), and
returns the job's result (any JSON value, kept while the queue retains
completed jobs) or raises to fail the job.
"""

import json
import logging
import os
import sys
import time

from prioq_client import AuthenticatedClient, Client
from prioq_client.worker import Refused, Unauthorized, Worker


def echo(args, report):
    print(f"  echo {json.dumps(args)}", flush=True)
    return args


def sleep(args, report):
    total = args.get("ms", 1000)
    for step in range(1, 11):
        time.sleep(total / 10_000)
        report({"slept_ms": total * step // 10, "of_ms": total})
    return {"slept_ms": total}


def fail(args, report):
    raise RuntimeError(args.get("message", "task 'fail' always fails"))


TASKS = {"echo": echo, "sleep": sleep, "fail": fail}


def main():
    url, queue = os.environ.get("PRIOQ_URL"), os.environ.get("PRIOQ_QUEUE")
    if not url or not queue:
        sys.exit("worker: set PRIOQ_URL (e.g. http://127.0.0.1:8080) and PRIOQ_QUEUE")
    # The worker logs each step it takes; those lines are this program's output.
    logging.basicConfig(stream=sys.stdout, format="%(message)s")
    logging.getLogger("prioq_client.worker").setLevel(logging.INFO)
    token = os.environ.get("PRIOQ_TOKEN")
    client = AuthenticatedClient(base_url=url, token=token) if token else Client(base_url=url)
    worker = Worker(
        client,
        queue,
        TASKS,
        name=os.environ.get("PRIOQ_WORKER"),
        lease_ms=int(os.environ.get("PRIOQ_LEASE_MS", "30000")),
    )
    try:
        worker.run()  # until SIGTERM or Ctrl-C
    except Unauthorized as error:
        sys.exit(f"worker: prioq refused the token ({error}); set PRIOQ_TOKEN to a valid API token")
    except Refused as error:
        sys.exit(f"worker: prioq refused a request ({error}); check PRIOQ_QUEUE and PRIOQ_LEASE_MS")
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
