"""A producer's enqueue that backs off while prioq asks it to wait.

    from prioq_client import Client
    from prioq_client.models import EnqueueRequest
    from prioq_client.producer import enqueue

    client = Client(base_url="http://127.0.0.1:8080")
    job = enqueue(client, "uploads", EnqueueRequest(task="scan", id="scan-7"), give_up_after_s=30)

`enqueue` answers the job: the one made (201), or the one already known
under its id or dedup key (200). It sends the same body again, after a
back-off, while prioq asks it to wait: on 429 `queue_full` (a bounded
queue at its `max_pending`) it waits at least the answer's `Retry-After`,
and longer (0.5 s, 1 s ... 30 s, with jitter) the longer the queue stays
full; on a 503 with `effect: none` (nothing happened) too. Without an
answer, on a 502, or on a 503 of unknown effect, it sends again only when
the job has an `id`, which makes a second send add nothing (without one,
a resend could add the job twice: it raises Unavailable). Any other
refusal raises Refused (Unauthorized for 401) at once, and the last one
is raised when `give_up_after_s` (60 s by default) runs out.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from http import HTTPStatus

import httpx

from .api.jobs import enqueue as enqueue_call
from .client import AuthenticatedClient, Client
from .models import Effect, EnqueueRequest, JobView, Problem
from .types import Unset
from .worker import Refused, Unauthorized, Unavailable, _backoff_s

__all__ = ["enqueue"]


def enqueue(
    client: AuthenticatedClient | Client,
    queue: str,
    job: EnqueueRequest,
    *,
    give_up_after_s: float = 60.0,
) -> JobView:
    """Enqueues `job` on `queue`, backing off while prioq asks to wait; see the module's docstring."""
    deadline = time.monotonic() + give_up_after_s
    idempotent = isinstance(job.id, str)
    failures = 0
    while True:
        failures += 1
        wait = _backoff_s(failures)
        last: Exception
        try:
            response = enqueue_call.sync_detailed(queue, client=client, body=job)  # type: ignore[arg-type]
        except (httpx.HTTPError, OSError) as error:
            if not idempotent:
                raise Unavailable(str(error) or type(error).__name__) from None
            last = Unavailable(str(error) or type(error).__name__)
        else:
            status = int(response.status_code)
            if status < 400 and isinstance(response.parsed, JobView):
                return response.parsed
            problem = response.parsed if isinstance(response.parsed, Problem) else None
            code = problem.code.value if problem is not None else HTTPStatus(status).phrase
            detail = problem.detail if problem is not None else ""
            effect = problem.effect if problem is not None and not isinstance(problem.effect, Unset) else None
            if status == 401:
                raise Unauthorized(status, code, detail)
            last = Refused(status, code, detail) if status < 500 else Unavailable(f"{status} {code}: {detail}")
            again = (
                status == 429
                or (status == 503 and (effect == Effect.NONE or idempotent))
                or (status == 502 and idempotent)
            )
            if not again:
                raise last
            wait = max(wait, _retry_after_s(response.headers.get("retry-after")))
        if time.monotonic() + wait > deadline:
            raise last
        time.sleep(wait)


def _retry_after_s(header: str | None) -> float:
    """The wait a `Retry-After` header asks for, in seconds (its delay or its HTTP date); 0 for none."""
    if header is None:
        return 0.0
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(header).timestamp() - time.time())
    except (TypeError, ValueError):
        return 0.0
