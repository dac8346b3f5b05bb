"""A worker: claims jobs from one queue and runs a task for each.

    from prioq_client import AuthenticatedClient
    from prioq_client.worker import Worker

    def resize(args, report):
        report({"done": 0, "of": 3})  # any JSON value, shown as the job's progress
        return {"thumbnail": "cat-small.png"}  # the job's result

    client = AuthenticatedClient(base_url="http://127.0.0.1:8080", token="...")
    Worker(client, "images", {"resize": resize}).run()

A task takes the job's args and a `report` function, and returns the job's
result (any JSON value, kept while the queue retains completed jobs) or
raises to fail the job. A job whose task is unknown fails too. When the
job is cancelled while its task runs, prioq says so on the next extend:
`report.cancelled` (a threading.Event) is set and the extends stop; the
task should stop soon (return or raise): the job ends `cancelled` either
way and is not delivered again.

The worker claims one job at a time, with a long poll (`wait_ms`) while
the queue is empty. While a task runs, it extends the job's lease every
third of the lease, and at once when the task reports progress (the
progress goes with that extend); when prioq answers that the lease is lost,
the job's outcome is dropped. A job done is acked with the next claim,
which then does not wait, so that the ack's outcome is known at once: a
busy worker sends one request per job. A job failed is nacked with the
exception's text and a retry delay of 1 s, 2 s, 4 s ... 1 min by attempt.
While prioq or its Redis cannot be reached (network errors, 5xx), the
worker backs off (0.5 s, 1 s, 2 s ... 30 s, with jitter) and sends the same
claim again, with the same ack and the same `request_id`: a repeat answers
the jobs the lost answer leased, under the same leases, so none is left
leased to nobody. An ack or a nack is tried five times.

`run()` returns once the worker is stopped: by `stop()`, from any thread,
or by SIGTERM or SIGINT, whose handlers `run()` installs while it runs
when it runs on the main thread (unless `handle_signals=False`). A stopped
worker claims nothing more, finishes the job in hand (and acks or nacks
it), and stops waiting in a long poll or a back-off at once. `run()`
raises `Unauthorized` when prioq refuses the token (401) and `Refused` on
any other answer that retrying cannot change (4xx).

The worker prints nothing: it logs each step to the logger
"prioq_client.worker" (claims and acks at INFO, lost leases, failures and
back-offs at WARNING), one line per step, e.g. `acked order-1234`.

With OpenTelemetry in the worker's environment (`pip install
opentelemetry-api`, and an SDK set up to export), each job's task runs in a
consumer span `process {queue}`, current while the task runs: on the job's
first delivery a child of the trace its enqueue came with (the job's
`trace`), on a later delivery the root of a new trace linked to it. A task
that raises marks its span failed. Without OpenTelemetry, nothing of it is
imported or done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from functools import partial
from http import HTTPStatus
from typing import Any, Callable, cast

import attrs
import httpx

from .api.leases import ack, claim, extend, nack
from .client import AuthenticatedClient, Client
from .models import (
    AckEntry,
    AckRequest,
    AckResult,
    ClaimRequest,
    ClaimResponse,
    ExtendRequest,
    JobView,
    NackRequest,
    Problem,
    ProblemCode,
)
from .types import UNSET, Response

__all__ = ["Refused", "Report", "Task", "Unauthorized", "Worker"]

log = logging.getLogger(__name__)

class Report:
    """Given to a task with the job's args. Calling it shows how far the job got: it sends
    any JSON value with a heartbeat. `cancelled` is a threading.Event set when prioq asks
    the job to stop (a cancel): the task should stop soon, returning or raising; the job
    then ends `cancelled` either way, and is not extended any more."""

    def __init__(self, beat: _Heartbeat) -> None:
        self._beat = beat
        self.cancelled = beat.cancelled

    def __call__(self, progress: Any) -> None:
        self._beat.report(progress)

Task = Callable[[Any, Report], Any]
"""Runs a job: takes its args and a Report, returns its result."""

TRIES = 5  # for an ack or a nack while prioq or its Redis is unavailable
MAX_ERROR_CHARS = 2000  # prioq keeps at most this much of a nack's error
CALL_TIMEOUT_S = 10.0  # for an ack or a nack
POLL_MARGIN_S = 10.0  # how long a long poll may outlast its wait_ms


class Refused(Exception):
    """prioq refused a request (4xx): a wrong setting or a bug, which retrying cannot fix."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class Unauthorized(Refused):
    """401: no API token, or a wrong one."""


class Unavailable(Exception):
    """prioq or its Redis cannot be reached now (network errors, 5xx): retry later."""


class Worker:
    """Claims jobs from one queue of prioq and runs each job's task; see the module's docstring."""

    def __init__(
        self,
        client: AuthenticatedClient | Client,
        queue: str,
        tasks: Mapping[str, Task],
        *,
        name: str | None = None,
        lease_ms: int = 30_000,
        wait_ms: int = 10_000,
    ) -> None:
        """`client` gives prioq's address and token (a plain Client when prioq runs without
        tokens); the worker makes its own connections from its settings. `name` is shown as
        the worker of the jobs it holds, host-pid by default."""
        self.queue = queue
        self.tasks = dict(tasks)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self._client = client
        self._stopping = False
        self._waker: _Waker | None = None

    def stop(self) -> None:
        """Makes run() return once the job in hand, if any, is acked or nacked; a stopped
        worker stays stopped.

        Safe from any thread and from a signal handler: it takes no lock.
        """
        self._stopping = True
        waker = self._waker
        if waker is not None:
            waker.wake()

    def run(self, *, handle_signals: bool = True) -> None:
        """Works until stop() is called or SIGTERM or SIGINT comes.

        Raises Unauthorized when prioq refuses the token, Refused when it refuses a
        request for another reason.
        """
        lines = _Lines(self._client, self.wait_ms, self.lease_ms)
        self._waker = waker = _Waker()
        previous = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.getsignal(signum)
                signal.signal(signum, self._on_signal)
        try:
            self._work(lines)
        finally:
            for signum, handler in previous.items():
                if handler is not None:
                    signal.signal(signum, handler)
            self._waker = None
            waker.close()
            lines.close()

    def _on_signal(self, signum: int, frame: object) -> None:
        # Only a flag and a wake: the signal may have come while this thread
        # held a lock (logging's, say).
        self.stop()

    def _work(self, lines: _Lines) -> None:
        log.info("worker %s polling %s", self.name, self.queue)
        done: _Done | None = None  # the job finished last: acked with the next claim
        sent = 0  # claims sent that carry its ack
        failures = 0
        request: ClaimRequest | None = None  # the claim to send, kept while it is retried
        while not self._stopping:
            if request is None:
                request = ClaimRequest(
                    worker=self.name,
                    lease_ms=self.lease_ms,
                    max_jobs=1,
                    wait_ms=self.wait_ms,
                    request_id=uuid.uuid4().hex,
                )
                if done is not None:
                    # No wait: the ack's outcome comes back at once.
                    request.wait_ms = 0
                    request.ack = [AckEntry(id=done.job_id, lease_token=done.token, result=done.result)]
            if done is not None:
                sent += 1
            try:
                answer = self._claim(lines, request)
            except Unavailable as error:
                failures += 1
                pause = _backoff_s(failures)
                log.warning("backing off %.1f s: %s", pause, error)
                self._pause(pause)
                continue  # the same claim, request id and ack: a repeat answers what it leased
            request = None
            if answer is None:
                break
            failures = 0
            if done is not None:
                self._report_ack(done.job_id, answer.acked, sent)
                done, sent = None, 0
            for job in answer.jobs:
                done = self._handle(lines, job)
        if done is not None:
            body = AckRequest(lease_token=done.token, result=done.result)
            send = partial(ack.sync_detailed, self.queue, done.job_id, client=lines.calls, body=body)
            self._finish(done.job_id, "ack", send, sent)

    def _claim(self, lines: _Lines, request: ClaimRequest) -> ClaimResponse | None:
        """Sends a claim; answers prioq's answer, or None when a stop came first.

        The claim goes on a thread of its own so that a stop need not wait for a long poll
        to end; a claim left behind gives back what it brings (see _release).
        """
        call = _Call(
            partial(_answer, partial(claim.sync_detailed, self.queue, client=lines.claims, body=request)),
            self._wake,
            partial(self._release, lines),
        )
        call.start()
        while True:
            if call.finished:
                return cast(ClaimResponse, call.answer())
            if self._stopping and call.abandon():
                lines.abandon_claims()
                return None
            self._wait(None)

    def _release(self, lines: _Lines, answer: Any) -> None:
        """Gives back at once the jobs a claim brought after the worker stopped waiting for it,
        instead of leaving them leased until their leases run out."""
        try:
            if not isinstance(answer, ClaimResponse):
                return
            for job in answer.jobs:
                body = NackRequest(
                    lease_token=str(job.lease_token), delay_ms=0, error="the worker stopped before it began the job"
                )
                try:
                    _answer(partial(nack.sync_detailed, self.queue, job.id, client=lines.claims, body=body))
                    log.warning("released %s: claimed as the worker stopped", job.id)
                except (Refused, Unavailable) as error:
                    log.warning("could not release %s (%s): it runs again once its lease runs out", job.id, error)
        finally:
            lines.claims.get_httpx_client().close()

    def _handle(self, lines: _Lines, job: JobView) -> _Done | None:
        """Runs the job's task; answers what to ack, or None when the job was nacked or lost."""
        token = str(job.lease_token)
        log.info("claimed %s (%s)", job.id, job.task)
        beat = _Heartbeat(self.queue, job.id, token, self.lease_ms, lines.beats)
        beat.start()
        error: str | None = None
        result: Any = None
        try:
            with _process_span(self.queue, job):
                task = self.tasks.get(job.task)
                if task is None:
                    raise LookupError(f"no task named {job.task!r} in this worker")
                result = task(job.args, Report(beat))
        except Exception as failure:  # whatever the task raises fails the job
            error = f"{type(failure).__name__}: {failure}"
        finally:
            beat.stop()
        if beat.lost:
            log.warning("dropped %s: lease lost", job.id)
            return None
        if error is None:
            return _Done(job.id, token, UNSET if result is None else result)
        body = NackRequest(lease_token=token, error=error[:MAX_ERROR_CHARS], delay_ms=_retry_delay_ms(job.attempts))
        self._finish(
            job.id,
            "nack",
            partial(nack.sync_detailed, self.queue, job.id, client=lines.calls, body=body),
            0,
            f"nacked {job.id}: {error}",
        )
        return None

    def _report_ack(self, job_id: str, acked: Any, sent: int) -> None:
        """Logs the outcome of an ack sent with a claim, the `sent`th claim to carry it."""
        outcome = acked[0] if isinstance(acked, list) and acked else None
        status = outcome.status if isinstance(outcome, AckResult) else 0
        if status == 204 or (status == 404 and sent > 1):
            log.info("acked %s", job_id)  # a 404 on a resend: an earlier one went through
        else:
            code = outcome.code.value if outcome is not None and isinstance(outcome.code, ProblemCode) else status
            log.warning("dropped %s: %s (the lease ended before the ack)", job_id, code)

    def _finish(self, job_id: str, verb: str, send: Callable[[], Response[Any]], sent: int, message: str = "") -> None:
        """Acks or nacks, trying again while prioq is unavailable; the same token is safe to resend.

        `sent`: claims that carried this ack and may have reached prioq.
        """
        message = message or f"{verb}ed {job_id}"
        for attempt in range(1, TRIES + 1):
            try:
                _answer(send)
            except Refused as error:
                if error.status not in (404, 409):
                    raise
                if verb == "ack" and error.status == 404 and attempt + sent > 1:
                    log.info(message)  # an earlier try went through: the job is done
                else:
                    log.warning("dropped %s: %s (the lease ended before the %s)", job_id, error.code, verb)
                return
            except Unavailable as error:
                log.warning("%s of %s failed, retrying: %s", verb, job_id, error)
                if attempt < TRIES:
                    time.sleep(_backoff_s(attempt))
                continue
            log.info(message)
            return
        log.warning("gave up on the %s of %s: the job runs again once its lease runs out", verb, job_id)

    def _wake(self) -> None:
        waker = self._waker
        if waker is not None:
            waker.wake()

    def _wait(self, timeout: float | None) -> None:
        waker = self._waker
        if waker is not None:
            waker.wait(timeout)

    def _pause(self, seconds: float) -> None:
        """Sleeps `seconds`, or less when the worker is stopped meanwhile."""
        deadline = time.monotonic() + seconds
        while not self._stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._wait(left)


_otel: Any = None  # OpenTelemetry's trace API once looked for: False when it is not installed


def _opentelemetry() -> Any:
    """OpenTelemetry's trace API and W3C propagator, or None when it is not installed."""
    global _otel
    if _otel is None:
        try:
            from opentelemetry import trace  # noqa: PLC0415
            from opentelemetry.trace.propagation.tracecontext import (  # noqa: PLC0415
                TraceContextTextMapPropagator,
            )

            _otel = (trace, TraceContextTextMapPropagator())
        except ImportError:
            _otel = False
    return _otel or None


@contextlib.contextmanager
def _process_span(queue: str, job: JobView) -> Iterator[None]:
    """Runs its block in the job's consumer span `process {queue}` when OpenTelemetry is
    installed: a child of the job's trace on its first delivery (attempts 0), the root of
    a new trace linked to it on later ones."""
    otel = _opentelemetry()
    if otel is None:
        yield
        return
    from opentelemetry.context import Context  # noqa: PLC0415

    trace, propagator = otel
    carrier = {}
    if job.trace:
        carrier["traceparent"] = job.trace.traceparent
        if isinstance(job.trace.tracestate, str):
            carrier["tracestate"] = job.trace.tracestate
    enqueued = trace.get_current_span(propagator.extract(carrier, context=Context())).get_span_context()
    parent, links = Context(), []
    if enqueued.is_valid and job.attempts == 0:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(enqueued), Context())
    elif enqueued.is_valid:
        links = [trace.Link(enqueued)]
    attributes = {
        "messaging.system": "prioq",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": job.id,
        "prioq.job.task": job.task,
        "prioq.job.attempts": job.attempts,
    }
    tracer = trace.get_tracer("prioq_client.worker")
    with tracer.start_as_current_span(
        f"process {queue}", context=parent, kind=trace.SpanKind.CONSUMER, links=links, attributes=attributes
    ):
        yield


@attrs.define(frozen=True)
class _Done:
    """A job whose task returned: acked with the next claim."""

    job_id: str
    token: str
    result: Any


class _Lines:
    """The worker's connections to prioq: one client per kind of call, each with the timeout
    that call needs (the generated functions take no timeout per call, and a long poll must
    outlast its wait where a heartbeat must not outlast a third of the lease)."""

    def __init__(self, client: AuthenticatedClient | Client, wait_ms: int, lease_ms: int) -> None:
        # Every /v1 route declares bearer auth, so the generated functions ask for an
        # AuthenticatedClient; a plain Client serves a prioq that runs without tokens.
        self.claims = cast(AuthenticatedClient, _with_timeout(client, wait_ms / 1000 + POLL_MARGIN_S))
        self.calls = cast(AuthenticatedClient, _with_timeout(client, CALL_TIMEOUT_S))
        self.beats = cast(AuthenticatedClient, _with_timeout(client, lease_ms / 3000))
        self._claims_abandoned = False

    def abandon_claims(self) -> None:
        """A claim left behind closes the claims' connections itself, once it has its answer."""
        self._claims_abandoned = True

    def close(self) -> None:
        self.calls.get_httpx_client().close()
        self.beats.get_httpx_client().close()
        if not self._claims_abandoned:
            self.claims.get_httpx_client().close()


def _with_timeout(client: AuthenticatedClient | Client, seconds: float) -> AuthenticatedClient | Client:
    # evolve, not with_timeout: that one also changes the timeout of the caller's own
    # connections, and the copy starts without any.
    return attrs.evolve(client, timeout=httpx.Timeout(seconds))


class _Call(threading.Thread):
    """One request on a thread of its own, so that the thread that waits for it can give up.

    A daemon: a call given up never holds the process up at exit.
    """

    def __init__(self, send: Callable[[], Any], wake: Callable[[], None], late: Callable[[Any], None]) -> None:
        super().__init__(daemon=True)
        self._send = send
        self._wake = wake
        self._late = late  # gets the answer of a call given up
        self._lock = threading.Lock()
        self._abandoned = False
        self._answer: Any = None
        self._error: BaseException | None = None
        self.finished = False

    def run(self) -> None:
        answer: Any = None
        error: BaseException | None = None
        try:
            answer = self._send()
        except BaseException as failure:  # handed over whole: the waiting thread must wake
            error = failure
        with self._lock:
            self._answer, self._error, self.finished = answer, error, True
            abandoned = self._abandoned
        if abandoned:
            self._late(answer)
        else:
            self._wake()

    def abandon(self) -> bool:
        """Gives the call up; False when it has already finished (then its answer counts)."""
        with self._lock:
            self._abandoned = not self.finished
            return self._abandoned

    def answer(self) -> Any:
        """What the request answered, or raises what it raised; only once finished."""
        if self._error is not None:
            raise self._error
        return self._answer


class _Waker:
    """Wakes a thread that waits in select on the read end of a socket pair.

    A signal handler can write to a socket, where setting a threading.Event could deadlock:
    the handler runs on the thread that may hold the Event's lock.
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def wake(self) -> None:
        try:
            self._writer.send(b"\0")
        except OSError:
            pass  # full: a wake is pending already; closed: nobody waits any more

    def wait(self, timeout: float | None) -> None:
        """Returns after a wake, or after `timeout` seconds (None: no limit)."""
        select.select([self._reader], [], [], timeout)
        try:
            while self._reader.recv(4096):
                pass
        except OSError:
            pass  # drained

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


class _Heartbeat(threading.Thread):
    """Extends a job's lease every third of it, and at once when the task reports progress,
    until the job is done or the lease is lost."""

    def __init__(self, queue: str, job_id: str, token: str, lease_ms: int, client: AuthenticatedClient) -> None:
        super().__init__(daemon=True)
        self._queue = queue
        self._job_id = job_id
        self._token = token
        self._lease_ms = lease_ms
        self._client = client
        self._poke = threading.Event()  # a report to send, or the end
        self._lock = threading.Lock()
        self._progress: Any = UNSET
        self._done = False
        self.lost = False
        self.cancelled = threading.Event()  # prioq asked the job to stop

    def report(self, progress: Any) -> None:
        """Sends `progress` (any JSON value) with a heartbeat now."""
        with self._lock:
            self._progress = progress
        self._poke.set()

    def stop(self) -> None:
        self._done = True
        self._poke.set()
        self.join()

    def run(self) -> None:
        interval = self._lease_ms / 3000
        while True:
            self._poke.wait(interval)
            self._poke.clear()
            if self._done:
                return
            with self._lock:
                progress, self._progress = self._progress, UNSET
            body = ExtendRequest(lease_token=self._token, lease_ms=self._lease_ms, progress=progress)
            try:
                job = _answer(partial(extend.sync_detailed, self._queue, self._job_id, client=self._client, body=body))
                if isinstance(job, JobView) and job.cancel_requested:
                    # No more extends: the job ends cancelled with its ack, its nack or its lease.
                    log.warning("cancel requested for %s: telling its task", self._job_id)
                    self.cancelled.set()
                    return
            except Refused as error:
                if error.status in (404, 409):
                    log.warning("lease lost on %s (%s): another worker may have it", self._job_id, error.code)
                    self.lost = True
                    return
                log.warning("heartbeat for %s failed, retrying: %s", self._job_id, error)
            except Unavailable as error:
                # The lease still runs: the next beat tries again (a report in this one is lost).
                log.warning("heartbeat for %s failed, retrying: %s", self._job_id, error)


def _answer(send: Callable[[], Response[Any]]) -> Any:
    """Sends a request with a generated function; answers the parsed body of a success, or
    raises Unauthorized, Refused or Unavailable."""
    try:
        response = send()
    except (httpx.HTTPError, OSError) as error:
        raise Unavailable(str(error) or type(error).__name__) from None
    except (ValueError, KeyError, TypeError) as error:
        # A body the models cannot read, such as a proxy's error page: the status goes
        # with it, and a retry is the best guess.
        raise Unavailable(f"unreadable answer ({type(error).__name__}: {error})") from None
    status = int(response.status_code)
    if status < 400:
        return response.parsed
    problem = response.parsed if isinstance(response.parsed, Problem) else None
    code = problem.code.value if problem is not None else HTTPStatus(status).phrase
    detail = problem.detail if problem is not None else ""
    if status >= 500:
        raise Unavailable(f"{status} {code}: {detail}")
    if status == 401:
        raise Unauthorized(status, code, detail)
    raise Refused(status, code, detail)


def _backoff_s(failures: int) -> float:
    """Seconds to wait after `failures` failures in a row: 0.5, 1, 2 ... 30, with jitter."""
    # The exponent stops growing past the cap: hours of outage must not overflow a float.
    return min(0.5 * (1 << min(failures - 1, 6)), 30.0) * random.uniform(0.5, 1.0)


def _retry_delay_ms(attempts: int) -> int:
    """How long a failed job waits before it is claimable again: 1 s, 2 s, 4 s ... 1 min."""
    return min(1000 << min(attempts, 6), 60_000)
