"""Runs the Python worker helper on jobs with and without a trace, with
OpenTelemetry's SDK exporting to memory, and prints the spans it made as
JSON lines (tests/e2e/traces.test.mjs judges them).

    PRIOQ_URL=... PRIOQ_QUEUE=... python worker_spans.py [--without-opentelemetry]

With --without-opentelemetry, OpenTelemetry cannot be imported (as if not
installed): the worker must run its jobs all the same; prints `acked ID` per
job done.
"""

from __future__ import annotations

import json
import os
import sys
import threading

if "--without-opentelemetry" in sys.argv:
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # import fails

import httpx

from prioq_client import Client
from prioq_client.worker import Worker

URL = os.environ["PRIOQ_URL"]
QUEUE = os.environ["PRIOQ_QUEUE"]
FIRST = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
RETRIED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def enqueue(job: dict, traceparent: str | None = None) -> None:
    headers = {"traceparent": traceparent} if traceparent else {}
    answer = httpx.post(f"{URL}/v1/queues/{QUEUE}/jobs", json=job, headers=headers)
    answer.raise_for_status()


def main() -> None:
    without = "--without-opentelemetry" in sys.argv
    runs: dict[str, int] = {}
    done = threading.Event()
    expected = {"first": 1, "retried": 2, "plain": 1}
    if without:
        expected = {"plain": 1}

    def task(args: dict, report: object) -> str:
        name = args["name"]
        runs[name] = runs.get(name, 0) + 1
        if all(runs.get(key, 0) >= count for key, count in expected.items()):
            done.set()
        if name == "retried" and runs[name] == 1:
            raise RuntimeError("fails on its first run")
        return name

    if without:
        enqueue({"id": "plain", "task": "work", "args": {"name": "plain"}})
    else:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        enqueue({"id": "first", "task": "work", "args": {"name": "first"}}, FIRST)
        enqueue({"id": "retried", "task": "work", "args": {"name": "retried"}}, RETRIED)
        enqueue({"id": "plain", "task": "work", "args": {"name": "plain"}})

    worker = Worker(Client(base_url=URL), QUEUE, {"work": task}, lease_ms=5000, wait_ms=500)
    threading.Thread(target=lambda: (done.wait(60), worker.stop()), daemon=True).start()
    worker.run(handle_signals=False)
    if without:
        print(json.dumps({"runs": runs}))
        return
    for span in exporter.get_finished_spans():
        context, parent = span.get_span_context(), span.parent
        print(
            json.dumps(
                {
                    "name": span.name,
                    "kind": span.kind.name,
                    "trace_id": format(context.trace_id, "032x"),
                    "span_id": format(context.span_id, "016x"),
                    "parent": format(parent.span_id, "016x") if parent else None,
                    "links": [
                        [format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")]
                        for link in span.links
                    ],
                    "attributes": dict(span.attributes or {}),
                    "status": span.status.status_code.name,
                }
            )
        )


if __name__ == "__main__":
    main()
