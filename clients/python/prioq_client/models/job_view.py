from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.state_name import StateName
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.backoff_spec import BackoffSpec
    from ..models.dependency_view import DependencyView
    from ..models.trace_view import TraceView


T = TypeVar("T", bound="JobView")


@_attrs_define
class JobView:
    """A job, as every endpoint that returns one shows it.

    Example:
        {'args': {'to': 'a@example.com'}, 'attempts': 0, 'enqueued_at': '2026-11-29T23:58:12.345Z', 'group': None, 'id':
            'order-1234', 'last_error': None, 'lease_expires_at': '2026-11-29T23:59:12.345Z', 'lease_token':
            '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1', 'max_attempts': 5, 'priority': 0, 'queue': 'emails', 'run_at': None,
            'state': 'processing', 'task': 'send_email', 'worker': 'billing-7'}

    Attributes:
        args (Any):
        attempts (int): Deliveries that ended without an ack.
        cancel_requested (bool): True while a processing job has been asked to stop by a cancel: its
            worker should stop; the job ends `cancelled` with its lease.
        enqueued_at (str):
        id (str):
        max_attempts (int):
        priority (int):
        queue (str):
        state (StateName): Where a job is in its life.
        task (str):
        backoff (BackoffSpec | None | Unset):
        cancel_reason (None | str | Unset): The reason its cancel gave; null when none.
        completed_at (None | str | Unset): When the job was acked or cancelled (completed and cancelled jobs
            only).
        created (bool | None | Unset): Whether an enqueue added the job (enqueue answers only).
        dead_at (None | str | Unset): When the job was dead-lettered (dead jobs only).
        dedup_key (None | str | Unset): The dedup key the job holds, until it lets it go; null otherwise
            (and in a claim's answer).
        dependants (list[str] | Unset): Up to 100 of the jobs that wait for this one and have not heard of
            its end yet (`queue/id` each); absent when none.
        dependencies (list[DependencyView] | None | Unset): The dependencies of a job enqueued with `after`, in its
            order,
            until it ends: how each ended (`state` null while it has not) and
            the result of each completed one; null for a job without any. A
            claim's answer has them all finished.
        expires_at (None | str | Unset): When the job, not claimed by then, is no longer delivered (jobs
            enqueued with `expires_in_ms`, until they end; null otherwise).
        fence (int | None | Unset): The lease's fence (processing jobs only): a number that grows with
            every grant of this job and, on one shard, of every job of the
            queue. Pass it to the systems the worker writes to, which refuse a
            write with a smaller fence than the last they took: a worker whose
            lease ran out cannot overwrite its successor's work.
        group (None | str | Unset): The job's group; null when it has none.
        last_error (None | str | Unset):
        lease_expires_at (None | str | Unset):
        lease_token (None | str | Unset):
        progress (Any | Unset): The latest progress its worker reported (with an extend), until the
            job ends; null until then.
        replaced (bool | None | Unset): True when an enqueue with its dedup key (mode `replace`) gave the
            waiting job its task, args, priority and delay (enqueue answers
            only, when it did).
        result (Any | Unset): What the worker sent with its ack (completed jobs, and cancelled
            jobs that were acked; null when it sent none).
        run_at (None | str | Unset): When a scheduled job becomes claimable.
        schedule (None | str | Unset): The schedule whose fire time made the job (fired jobs only).
        trace (None | TraceView | Unset):
        waiting_for (int | None | Unset): The dependencies not finished yet of a job enqueued with `after`,
            until it ends; null for a job without any.
        worker (None | str | Unset):
    """

    args: Any
    attempts: int
    cancel_requested: bool
    enqueued_at: str
    id: str
    max_attempts: int
    priority: int
    queue: str
    state: StateName
    task: str
    backoff: BackoffSpec | None | Unset = UNSET
    cancel_reason: None | str | Unset = UNSET
    completed_at: None | str | Unset = UNSET
    created: bool | None | Unset = UNSET
    dead_at: None | str | Unset = UNSET
    dedup_key: None | str | Unset = UNSET
    dependants: list[str] | Unset = UNSET
    dependencies: list[DependencyView] | None | Unset = UNSET
    expires_at: None | str | Unset = UNSET
    fence: int | None | Unset = UNSET
    group: None | str | Unset = UNSET
    last_error: None | str | Unset = UNSET
    lease_expires_at: None | str | Unset = UNSET
    lease_token: None | str | Unset = UNSET
    progress: Any | Unset = UNSET
    replaced: bool | None | Unset = UNSET
    result: Any | Unset = UNSET
    run_at: None | str | Unset = UNSET
    schedule: None | str | Unset = UNSET
    trace: None | TraceView | Unset = UNSET
    waiting_for: int | None | Unset = UNSET
    worker: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.backoff_spec import BackoffSpec  # noqa: PLC0415
        from ..models.trace_view import TraceView  # noqa: PLC0415

        args = self.args

        attempts = self.attempts

        cancel_requested = self.cancel_requested

        enqueued_at = self.enqueued_at

        id = self.id

        max_attempts = self.max_attempts

        priority = self.priority

        queue = self.queue

        state = self.state.value

        task = self.task

        backoff: dict[str, Any] | None | Unset
        if isinstance(self.backoff, Unset):
            backoff = UNSET
        elif isinstance(self.backoff, BackoffSpec):
            backoff = self.backoff.to_dict()
        else:
            backoff = self.backoff

        cancel_reason: None | str | Unset
        if isinstance(self.cancel_reason, Unset):
            cancel_reason = UNSET
        else:
            cancel_reason = self.cancel_reason

        completed_at: None | str | Unset
        if isinstance(self.completed_at, Unset):
            completed_at = UNSET
        else:
            completed_at = self.completed_at

        created: bool | None | Unset
        if isinstance(self.created, Unset):
            created = UNSET
        else:
            created = self.created

        dead_at: None | str | Unset
        if isinstance(self.dead_at, Unset):
            dead_at = UNSET
        else:
            dead_at = self.dead_at

        dedup_key: None | str | Unset
        if isinstance(self.dedup_key, Unset):
            dedup_key = UNSET
        else:
            dedup_key = self.dedup_key

        dependants: list[str] | Unset = UNSET
        if not isinstance(self.dependants, Unset):
            dependants = self.dependants

        dependencies: list[dict[str, Any]] | None | Unset
        if isinstance(self.dependencies, Unset):
            dependencies = UNSET
        elif isinstance(self.dependencies, list):
            dependencies = []
            for dependencies_type_0_item_data in self.dependencies:
                dependencies_type_0_item = dependencies_type_0_item_data.to_dict()
                dependencies.append(dependencies_type_0_item)

        else:
            dependencies = self.dependencies

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        else:
            expires_at = self.expires_at

        fence: int | None | Unset
        if isinstance(self.fence, Unset):
            fence = UNSET
        else:
            fence = self.fence

        group: None | str | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        else:
            group = self.group

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        lease_expires_at: None | str | Unset
        if isinstance(self.lease_expires_at, Unset):
            lease_expires_at = UNSET
        else:
            lease_expires_at = self.lease_expires_at

        lease_token: None | str | Unset
        if isinstance(self.lease_token, Unset):
            lease_token = UNSET
        else:
            lease_token = self.lease_token

        progress = self.progress

        replaced: bool | None | Unset
        if isinstance(self.replaced, Unset):
            replaced = UNSET
        else:
            replaced = self.replaced

        result = self.result

        run_at: None | str | Unset
        if isinstance(self.run_at, Unset):
            run_at = UNSET
        else:
            run_at = self.run_at

        schedule: None | str | Unset
        if isinstance(self.schedule, Unset):
            schedule = UNSET
        else:
            schedule = self.schedule

        trace: dict[str, Any] | None | Unset
        if isinstance(self.trace, Unset):
            trace = UNSET
        elif isinstance(self.trace, TraceView):
            trace = self.trace.to_dict()
        else:
            trace = self.trace

        waiting_for: int | None | Unset
        if isinstance(self.waiting_for, Unset):
            waiting_for = UNSET
        else:
            waiting_for = self.waiting_for

        worker: None | str | Unset
        if isinstance(self.worker, Unset):
            worker = UNSET
        else:
            worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "args": args,
                "attempts": attempts,
                "cancel_requested": cancel_requested,
                "enqueued_at": enqueued_at,
                "id": id,
                "max_attempts": max_attempts,
                "priority": priority,
                "queue": queue,
                "state": state,
                "task": task,
            }
        )
        if backoff is not UNSET:
            field_dict["backoff"] = backoff
        if cancel_reason is not UNSET:
            field_dict["cancel_reason"] = cancel_reason
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if created is not UNSET:
            field_dict["created"] = created
        if dead_at is not UNSET:
            field_dict["dead_at"] = dead_at
        if dedup_key is not UNSET:
            field_dict["dedup_key"] = dedup_key
        if dependants is not UNSET:
            field_dict["dependants"] = dependants
        if dependencies is not UNSET:
            field_dict["dependencies"] = dependencies
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if fence is not UNSET:
            field_dict["fence"] = fence
        if group is not UNSET:
            field_dict["group"] = group
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if lease_expires_at is not UNSET:
            field_dict["lease_expires_at"] = lease_expires_at
        if lease_token is not UNSET:
            field_dict["lease_token"] = lease_token
        if progress is not UNSET:
            field_dict["progress"] = progress
        if replaced is not UNSET:
            field_dict["replaced"] = replaced
        if result is not UNSET:
            field_dict["result"] = result
        if run_at is not UNSET:
            field_dict["run_at"] = run_at
        if schedule is not UNSET:
            field_dict["schedule"] = schedule
        if trace is not UNSET:
            field_dict["trace"] = trace
        if waiting_for is not UNSET:
            field_dict["waiting_for"] = waiting_for
        if worker is not UNSET:
            field_dict["worker"] = worker

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backoff_spec import BackoffSpec  # noqa: PLC0415
        from ..models.dependency_view import DependencyView  # noqa: PLC0415
        from ..models.trace_view import TraceView  # noqa: PLC0415

        d = dict(src_dict)
        args = d.pop("args")

        attempts = d.pop("attempts")

        cancel_requested = d.pop("cancel_requested")

        enqueued_at = d.pop("enqueued_at")

        id = d.pop("id")

        max_attempts = d.pop("max_attempts")

        priority = d.pop("priority")

        queue = d.pop("queue")

        state = StateName(d.pop("state"))

        task = d.pop("task")

        def _parse_backoff(data: object) -> BackoffSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                backoff_type_0 = BackoffSpec.from_dict(data)

                return backoff_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(BackoffSpec | None | Unset, data)

        backoff = _parse_backoff(d.pop("backoff", UNSET))

        def _parse_cancel_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cancel_reason = _parse_cancel_reason(d.pop("cancel_reason", UNSET))

        def _parse_completed_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        completed_at = _parse_completed_at(d.pop("completed_at", UNSET))

        def _parse_created(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        created = _parse_created(d.pop("created", UNSET))

        def _parse_dead_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        dead_at = _parse_dead_at(d.pop("dead_at", UNSET))

        def _parse_dedup_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        dedup_key = _parse_dedup_key(d.pop("dedup_key", UNSET))

        dependants = cast(list[str], d.pop("dependants", UNSET))

        def _parse_dependencies(data: object) -> list[DependencyView] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                dependencies_type_0 = []
                _dependencies_type_0 = data
                for dependencies_type_0_item_data in _dependencies_type_0:
                    dependencies_type_0_item = DependencyView.from_dict(dependencies_type_0_item_data)

                    dependencies_type_0.append(dependencies_type_0_item)

                return dependencies_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[DependencyView] | None | Unset, data)

        dependencies = _parse_dependencies(d.pop("dependencies", UNSET))

        def _parse_expires_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        def _parse_fence(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        fence = _parse_fence(d.pop("fence", UNSET))

        def _parse_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

        def _parse_lease_expires_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        lease_expires_at = _parse_lease_expires_at(d.pop("lease_expires_at", UNSET))

        def _parse_lease_token(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        lease_token = _parse_lease_token(d.pop("lease_token", UNSET))

        progress = d.pop("progress", UNSET)

        def _parse_replaced(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        replaced = _parse_replaced(d.pop("replaced", UNSET))

        result = d.pop("result", UNSET)

        def _parse_run_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        run_at = _parse_run_at(d.pop("run_at", UNSET))

        def _parse_schedule(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        schedule = _parse_schedule(d.pop("schedule", UNSET))

        def _parse_trace(data: object) -> None | TraceView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                trace_type_0 = TraceView.from_dict(data)

                return trace_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TraceView | Unset, data)

        trace = _parse_trace(d.pop("trace", UNSET))

        def _parse_waiting_for(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        waiting_for = _parse_waiting_for(d.pop("waiting_for", UNSET))

        def _parse_worker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        worker = _parse_worker(d.pop("worker", UNSET))

        job_view = cls(
            args=args,
            attempts=attempts,
            cancel_requested=cancel_requested,
            enqueued_at=enqueued_at,
            id=id,
            max_attempts=max_attempts,
            priority=priority,
            queue=queue,
            state=state,
            task=task,
            backoff=backoff,
            cancel_reason=cancel_reason,
            completed_at=completed_at,
            created=created,
            dead_at=dead_at,
            dedup_key=dedup_key,
            dependants=dependants,
            dependencies=dependencies,
            expires_at=expires_at,
            fence=fence,
            group=group,
            last_error=last_error,
            lease_expires_at=lease_expires_at,
            lease_token=lease_token,
            progress=progress,
            replaced=replaced,
            result=result,
            run_at=run_at,
            schedule=schedule,
            trace=trace,
            waiting_for=waiting_for,
            worker=worker,
        )

        job_view.additional_properties = d
        return job_view

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
