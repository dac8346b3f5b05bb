"""Runs the Python worker helper on one job that its task cancels itself
(as an operator would while it runs); the task waits for
`report.cancelled`, then returns. Prints the job as prioq shows it after
(tests/e2e/cancel.test.mjs judges it).

    PRIOQ_URL=... PRIOQ_QUEUE=... python worker_cancel.py
"""

from __future__ import annotations

import json
import os

import httpx

from prioq_client import Client
from prioq_client.worker import Worker

URL = os.environ["PRIOQ_URL"]
QUEUE = os.environ["PRIOQ_QUEUE"]


def main() -> None:
    httpx.post(f"{URL}/v1/queues/{QUEUE}/jobs", json={"id": "long-1", "task": "long", "retain_ms": 60000})
    told: list[bool] = []
    worker: Worker

    def long(args: object, report) -> dict:
        httpx.post(f"{URL}/v1/queues/{QUEUE}/jobs/long-1/cancel", json={"reason": "changed my mind"})
        told.append(report.cancelled.wait(10))
        worker.stop()
        return {"stopped": True}

    worker = Worker(Client(base_url=URL), QUEUE, {"long": long}, lease_ms=900, wait_ms=500)
    worker.run(handle_signals=False)
    job = httpx.get(f"{URL}/v1/queues/{QUEUE}/jobs/long-1").json()
    print(json.dumps({"told": told, "state": job["state"], "reason": job["cancel_reason"], "result": job["result"]}))


if __name__ == "__main__":
    main()
