from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.on_dependency_failure import OnDependencyFailure
from ..models.on_expiry import OnExpiry
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.backoff_spec import BackoffSpec
    from ..models.dedup_request import DedupRequest


T = TypeVar("T", bound="EnqueueRequest")


@_attrs_define
class EnqueueRequest:
    """A job to add.

    Example:
        {'args': {'to': 'a@example.com'}, 'delay_ms': 0, 'group': 'tenant-42', 'id': 'order-1234', 'max_attempts': 5,
            'priority': 0, 'task': 'send_email'}

    Attributes:
        task (str): What the worker should do, 1 to 200 characters.
        after (list[str] | None | Unset): The jobs this one waits for (1 to 100): each a job id of this queue,
            or `queue/id` of another; in a batch, an earlier entry's id too.
            The job is `waiting` (never claimed) until every one of them is
            `completed`, then `pending` (or `scheduled`, its delay counted from
            then). A ref to no job answers 422 and nothing is enqueued. Example: ['fetch-1', 'images/resize-7'].
        args (Any | Unset): Any JSON value, kept as sent; default `{}`.
        backoff (BackoffSpec | None | Unset):
        dedup (DedupRequest | None | Unset):
        delay_ms (int | Unset): Keep the job scheduled (not claimable) this long; at most 30 days.
        expires_in_ms (int | None | Unset): A job not claimed within this long is never delivered: 1 to
            2592000000 (30 days).
        group (None | str | Unset): The group (a tenant, say) the job shares its priority with fairly;
            jobs without one form a group of their own.
        id (None | str | Unset): A client-chosen id makes the enqueue idempotent.
        max_attempts (int | None | Unset): Deliveries before the job is dead-lettered, 1 to 1000; default from
            configuration.
        on_dependency_failure (None | OnDependencyFailure | Unset):
        on_expiry (None | OnExpiry | Unset):
        priority (int | Unset): 0 (most urgent) to 255; default 1. Default: 1.
        retain_ms (int | None | Unset): Keep the job this long once acked, `completed` with its result; its
            id stays taken meanwhile. 0 to 2592000000 (30 days); default the
            queue's `retain_ms` setting.
        run_at (datetime.datetime | None | Unset): Keep the job scheduled until this time (RFC 3339, with its offset)
            by Redis's clock, which every time prioq keeps is read from; a time
            passed makes it pending at once. At most 30 days ahead; not with
            `delay_ms` or `after`. Example: 2026-12-24T09:00:00Z.
    """

    task: str
    after: list[str] | None | Unset = UNSET
    args: Any | Unset = UNSET
    backoff: BackoffSpec | None | Unset = UNSET
    dedup: DedupRequest | None | Unset = UNSET
    delay_ms: int | Unset = UNSET
    expires_in_ms: int | None | Unset = UNSET
    group: None | str | Unset = UNSET
    id: None | str | Unset = UNSET
    max_attempts: int | None | Unset = UNSET
    on_dependency_failure: None | OnDependencyFailure | Unset = UNSET
    on_expiry: None | OnExpiry | Unset = UNSET
    priority: int | Unset = 1
    retain_ms: int | None | Unset = UNSET
    run_at: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.backoff_spec import BackoffSpec  # noqa: PLC0415
        from ..models.dedup_request import DedupRequest  # noqa: PLC0415

        task = self.task

        after: list[str] | None | Unset
        if isinstance(self.after, Unset):
            after = UNSET
        elif isinstance(self.after, list):
            after = self.after

        else:
            after = self.after

        args = self.args

        backoff: dict[str, Any] | None | Unset
        if isinstance(self.backoff, Unset):
            backoff = UNSET
        elif isinstance(self.backoff, BackoffSpec):
            backoff = self.backoff.to_dict()
        else:
            backoff = self.backoff

        dedup: dict[str, Any] | None | Unset
        if isinstance(self.dedup, Unset):
            dedup = UNSET
        elif isinstance(self.dedup, DedupRequest):
            dedup = self.dedup.to_dict()
        else:
            dedup = self.dedup

        delay_ms = self.delay_ms

        expires_in_ms: int | None | Unset
        if isinstance(self.expires_in_ms, Unset):
            expires_in_ms = UNSET
        else:
            expires_in_ms = self.expires_in_ms

        group: None | str | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        else:
            group = self.group

        id: None | str | Unset
        if isinstance(self.id, Unset):
            id = UNSET
        else:
            id = self.id

        max_attempts: int | None | Unset
        if isinstance(self.max_attempts, Unset):
            max_attempts = UNSET
        else:
            max_attempts = self.max_attempts

        on_dependency_failure: None | str | Unset
        if isinstance(self.on_dependency_failure, Unset):
            on_dependency_failure = UNSET
        elif isinstance(self.on_dependency_failure, OnDependencyFailure):
            on_dependency_failure = self.on_dependency_failure.value
        else:
            on_dependency_failure = self.on_dependency_failure

        on_expiry: None | str | Unset
        if isinstance(self.on_expiry, Unset):
            on_expiry = UNSET
        elif isinstance(self.on_expiry, OnExpiry):
            on_expiry = self.on_expiry.value
        else:
            on_expiry = self.on_expiry

        priority = self.priority

        retain_ms: int | None | Unset
        if isinstance(self.retain_ms, Unset):
            retain_ms = UNSET
        else:
            retain_ms = self.retain_ms

        run_at: None | str | Unset
        if isinstance(self.run_at, Unset):
            run_at = UNSET
        elif isinstance(self.run_at, datetime.datetime):
            run_at = self.run_at.isoformat()
        else:
            run_at = self.run_at

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "task": task,
            }
        )
        if after is not UNSET:
            field_dict["after"] = after
        if args is not UNSET:
            field_dict["args"] = args
        if backoff is not UNSET:
            field_dict["backoff"] = backoff
        if dedup is not UNSET:
            field_dict["dedup"] = dedup
        if delay_ms is not UNSET:
            field_dict["delay_ms"] = delay_ms
        if expires_in_ms is not UNSET:
            field_dict["expires_in_ms"] = expires_in_ms
        if group is not UNSET:
            field_dict["group"] = group
        if id is not UNSET:
            field_dict["id"] = id
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if on_dependency_failure is not UNSET:
            field_dict["on_dependency_failure"] = on_dependency_failure
        if on_expiry is not UNSET:
            field_dict["on_expiry"] = on_expiry
        if priority is not UNSET:
            field_dict["priority"] = priority
        if retain_ms is not UNSET:
            field_dict["retain_ms"] = retain_ms
        if run_at is not UNSET:
            field_dict["run_at"] = run_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.backoff_spec import BackoffSpec  # noqa: PLC0415
        from ..models.dedup_request import DedupRequest  # noqa: PLC0415

        d = dict(src_dict)
        task = d.pop("task")

        def _parse_after(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                after_type_0 = cast(list[str], data)

                return after_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        after = _parse_after(d.pop("after", UNSET))

        args = d.pop("args", UNSET)

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

        def _parse_dedup(data: object) -> DedupRequest | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                dedup_type_0 = DedupRequest.from_dict(data)

                return dedup_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DedupRequest | None | Unset, data)

        dedup = _parse_dedup(d.pop("dedup", UNSET))

        delay_ms = d.pop("delay_ms", UNSET)

        def _parse_expires_in_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expires_in_ms = _parse_expires_in_ms(d.pop("expires_in_ms", UNSET))

        def _parse_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        id = _parse_id(d.pop("id", UNSET))

        def _parse_max_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_attempts = _parse_max_attempts(d.pop("max_attempts", UNSET))

        def _parse_on_dependency_failure(data: object) -> None | OnDependencyFailure | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_dependency_failure_type_0 = OnDependencyFailure(data)

                return on_dependency_failure_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnDependencyFailure | Unset, data)

        on_dependency_failure = _parse_on_dependency_failure(d.pop("on_dependency_failure", UNSET))

        def _parse_on_expiry(data: object) -> None | OnExpiry | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_expiry_type_0 = OnExpiry(data)

                return on_expiry_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnExpiry | Unset, data)

        on_expiry = _parse_on_expiry(d.pop("on_expiry", UNSET))

        priority = d.pop("priority", UNSET)

        def _parse_retain_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retain_ms = _parse_retain_ms(d.pop("retain_ms", UNSET))

        def _parse_run_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                run_at_type_0 = datetime.datetime.fromisoformat(data)

                return run_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        run_at = _parse_run_at(d.pop("run_at", UNSET))

        enqueue_request = cls(
            task=task,
            after=after,
            args=args,
            backoff=backoff,
            dedup=dedup,
            delay_ms=delay_ms,
            expires_in_ms=expires_in_ms,
            group=group,
            id=id,
            max_attempts=max_attempts,
            on_dependency_failure=on_dependency_failure,
            on_expiry=on_expiry,
            priority=priority,
            retain_ms=retain_ms,
            run_at=run_at,
        )

        return enqueue_request
