#!/usr/bin/env python3
"""A prioq worker in Python, standard library only.

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
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


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

WAIT_MS = 10_000  # long poll: prioq answers as soon as a job is claimable
TRIES = 5  # for an ack or a nack while prioq or Redis is unavailable


class Unavailable(Exception):
    """prioq or its Redis cannot be reached now (network, 502, 503, 504): retry later."""


class Unauthorized(Exception):
    """401: no token, or a wrong one. Retrying will not help."""


class Gone(Exception):
    """404 not_found or 409 lease_lost: the job is no longer this worker's."""


class Refused(Exception):
    """Any other 4xx: a bug in this worker or a wrong setting; retrying will not help."""


class Shutdown(BaseException):
    """Raised by the signal handler to cut a long poll or a back-off short."""


class Client:
    """POSTs JSON to one queue's routes and maps every answer to a result or an exception."""

    def __init__(self, url, queue, token):
        self.base = f"{url.rstrip('/')}/v1/queues/{urllib.parse.quote(queue, safe='')}"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def post(self, path, body, timeout):
        request = urllib.request.Request(
            self.base + path, data=json.dumps(body).encode(), headers=self.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                data = response.read()
                return json.loads(data) if data else None
        except urllib.error.HTTPError as error:
            status, problem = error.code, read_problem(error)
            what = f"{status} {problem.get('code', error.reason)}: {problem.get('detail', '')}"
            if status == 401:
                raise Unauthorized(what) from None
            if status in (404, 409):
                raise Gone(problem.get("code", str(status))) from None
            if status >= 500:
                raise Unavailable(what) from None
            raise Refused(what) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise Unavailable(str(getattr(error, "reason", error))) from None


def read_problem(error):
    try:
        problem = json.loads(error.read())
        return problem if isinstance(problem, dict) else {}
    except (OSError, ValueError):
        return {}


def backoff(failures):
    """Seconds to wait after `failures` failures in a row: 0.5, 1, 2 ... 30, with jitter."""
    return min(0.5 * 2 ** (failures - 1), 30.0) * random.uniform(0.5, 1.0)


def retry_delay_ms(attempts):
    """How long a failed job waits before it is claimable again: 1 s, 2 s, 4 s ... 1 min."""
    return min(1000 * 2**attempts, 60_000)


def log(message):
    print(message, flush=True)


class Worker:
    def __init__(self, client, queue, name, lease_ms):
        self.client = client
        self.queue = queue
        self.name = name
        self.lease_ms = lease_ms
        self.stopping = threading.Event()
        # True while the worker only waits (long poll, back-off): then a
        # signal interrupts the wait. While a job runs, it only sets
        # `stopping`, and the job is finished first.
        self.idle = False

    def on_signal(self, signum, frame):
        # No printing here: the signal may have interrupted a print.
        self.stopping.set()
        if self.idle:
            raise Shutdown

    def run(self):
        log(f"worker {self.name} polling {self.queue}")
        claim = {"worker": self.name, "lease_ms": self.lease_ms, "max_jobs": 1, "wait_ms": WAIT_MS}
        pending = None  # (id, lease_token, result) of the job done last: acked with the next claim
        sent = 0  # claims sent that carry it
        failures = 0
        try:
            while not self.stopping.is_set():
                body = claim
                if pending:
                    # No wait: the ack's outcome comes back at once.
                    body = dict(claim, wait_ms=0, ack=[ack_entry(*pending)])
                    sent += 1
                self.idle = True
                try:
                    # A job claimed in the instant a signal cuts this short
                    # goes back to the queue when its lease runs out.
                    answer = self.client.post("/claim", body, timeout=WAIT_MS / 1000 + 10)
                except Unavailable as error:
                    failures += 1
                    pause = backoff(failures)
                    log(f"backing off {pause:.1f} s: {error}")
                    time.sleep(pause)
                    continue  # the same claim, with the same ack: the token is safe to resend
                finally:
                    self.idle = False
                failures = 0
                if pending:
                    self.report_ack(pending[0], answer["acked"][0], sent)
                    pending, sent = None, 0
                for job in answer["jobs"]:
                    pending = self.handle(job)
        except Shutdown:
            pass
        if pending:
            job_id = pending[0]
            path = f"/jobs/{urllib.parse.quote(job_id, safe='')}"
            body = ack_entry(*pending)
            del body["id"]
            self.finish(path, job_id, "ack", body, f"acked {job_id}", sent)
        log("stopped")

    def handle(self, job):
        """Runs the job; answers (id, lease_token, result) when it is to be acked, else None."""
        job_id, token = job["id"], job["lease_token"]
        path = f"/jobs/{urllib.parse.quote(job_id, safe='')}"
        log(f"claimed {job_id} ({job['task']})")
        beat = Heartbeat(self, path, job_id, token)
        beat.start()
        try:
            task = TASKS.get(job["task"])
            if task is None:
                raise LookupError(f"no task named {job['task']!r} in this worker")
            result = task(job["args"], beat.report)
            error = None
        except Exception as failure:  # the task's failure, whatever it is, fails the job
            error = f"{type(failure).__name__}: {failure}"
        finally:
            beat.stop()
        if beat.lost:
            log(f"dropped {job_id}: lease lost")
        elif error is None:
            return job_id, token, result
        else:
            body = {"lease_token": token, "error": error[:2000], "delay_ms": retry_delay_ms(job["attempts"])}
            self.finish(path, job_id, "nack", body, f"nacked {job_id}: {error}")
        return None

    def report_ack(self, job_id, result, sent):
        """Logs the outcome of an ack sent with a claim, the `sent`th claim to carry it."""
        if result["status"] == 204 or (result["status"] == 404 and sent > 1):
            log(f"acked {job_id}")  # a 404 on a retry: an earlier try went through
        else:
            log(f"dropped {job_id}: {result.get('code', result['status'])} (the lease ended before the ack)")

    def finish(self, path, job_id, verb, body, message, sent=0):
        """Acks or nacks, retrying while prioq is unavailable; the same token is safe to resend.

        `sent`: claims that carried this ack and may have reached prioq.
        """
        for attempt in range(1, TRIES + 1):
            try:
                self.client.post(f"{path}/{verb}", body, timeout=10)
                log(message)
                return
            except Gone as error:
                if verb == "ack" and attempt + sent > 1 and str(error) == "not_found":
                    log(message)  # an earlier try went through: the job is done
                else:
                    log(f"dropped {job_id}: {error} (the lease ended before the {verb})")
                return
            except Unavailable as error:
                log(f"{verb} of {job_id} failed, retrying: {error}")
                time.sleep(backoff(attempt))
        log(f"gave up on the {verb} of {job_id}: the job runs again once its lease runs out")


def ack_entry(job_id, token, result):
    """An ack of the job, with its result when the task returned one."""
    entry = {"id": job_id, "lease_token": token}
    if result is not None:
        entry["result"] = result
    return entry


class Heartbeat(threading.Thread):
    """Extends a job's lease every third of it, and at once when the task reports progress,
    until the job is done or the lease is lost."""

    def __init__(self, worker, path, job_id, token):
        super().__init__(daemon=True)
        self.worker, self.path, self.job_id, self.token = worker, path, job_id, token
        self.poke = threading.Event()  # a report to send, or the end
        self.done = False
        self.lost = False
        self.progress = None
        self.lock = threading.Lock()

    def report(self, progress):
        """Called by the task: sends `progress` (any JSON value) with a heartbeat now."""
        with self.lock:
            self.progress = progress
        self.poke.set()

    def stop(self):
        self.done = True
        self.poke.set()
        self.join()

    def run(self):
        interval = self.worker.lease_ms / 3000
        while True:
            self.poke.wait(interval)
            self.poke.clear()
            if self.done:
                return
            body = {"lease_token": self.token, "lease_ms": self.worker.lease_ms}
            with self.lock:
                progress, self.progress = self.progress, None
            if progress is not None:
                body["progress"] = progress
            try:
                self.worker.client.post(f"{self.path}/extend", body, timeout=interval)
            except Gone as error:
                log(f"lease lost on {self.job_id} ({error}): another worker may have it")
                self.lost = True
                return
            except (Unavailable, Unauthorized, Refused) as error:
                # The lease still runs; the next beat tries again (the report is dropped).
                log(f"heartbeat for {self.job_id} failed, retrying: {error}")


def main():
    url, queue = os.environ.get("PRIOQ_URL"), os.environ.get("PRIOQ_QUEUE")
    if not url or not queue:
        sys.exit("worker: set PRIOQ_URL (e.g. http://127.0.0.1:8080) and PRIOQ_QUEUE")
    lease_ms = int(os.environ.get("PRIOQ_LEASE_MS", "30000"))
    name = os.environ.get("PRIOQ_WORKER") or f"{socket.gethostname()}-{os.getpid()}"
    worker = Worker(Client(url, queue, os.environ.get("PRIOQ_TOKEN")), queue, name, lease_ms)
    signal.signal(signal.SIGTERM, worker.on_signal)
    signal.signal(signal.SIGINT, worker.on_signal)
    try:
        worker.run()
    except Unauthorized as error:
        sys.exit(f"worker: prioq refused the token ({error}); set PRIOQ_TOKEN to a valid API token")
    except Refused as error:
        sys.exit(f"worker: prioq refused a request ({error}); check PRIOQ_QUEUE and PRIOQ_LEASE_MS")


if __name__ == "__main__":
    main()
