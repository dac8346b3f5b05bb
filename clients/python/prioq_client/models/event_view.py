from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="EventView")


@_attrs_define
class EventView:
    """One event of a job's history.

    Attributes:
        at (str):
        event (str): `enqueued`, `claimed`, `acked`, `nacked`, `lease_expired`,
            `cancelled`, `expired` (its expiry came before a claim), `requeued`
            (from the DLQ) or `deleted`.
        error (None | str | Unset): The error it ended with (`nacked`, `lease_expired`).
        fence (int | None | Unset): The lease's fence (`claimed`).
        priority (int | None | Unset): The priority it was enqueued with (`enqueued`).
        state (None | str | Unset): Where the lease's end put the job (`nacked`, `lease_expired`):
            `pending`, `scheduled`, `dead` or `cancelled`.
        worker (None | str | Unset): The worker that claimed it (`claimed`, when it named itself).
    """

    at: str
    event: str
    error: None | str | Unset = UNSET
    fence: int | None | Unset = UNSET
    priority: int | None | Unset = UNSET
    state: None | str | Unset = UNSET
    worker: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at

        event = self.event

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        fence: int | None | Unset
        if isinstance(self.fence, Unset):
            fence = UNSET
        else:
            fence = self.fence

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        else:
            state = self.state

        worker: None | str | Unset
        if isinstance(self.worker, Unset):
            worker = UNSET
        else:
            worker = self.worker

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "event": event,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if fence is not UNSET:
            field_dict["fence"] = fence
        if priority is not UNSET:
            field_dict["priority"] = priority
        if state is not UNSET:
            field_dict["state"] = state
        if worker is not UNSET:
            field_dict["worker"] = worker

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        at = d.pop("at")

        event = d.pop("event")

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_fence(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        fence = _parse_fence(d.pop("fence", UNSET))

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        def _parse_worker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        worker = _parse_worker(d.pop("worker", UNSET))

        event_view = cls(
            at=at,
            event=event,
            error=error,
            fence=fence,
            priority=priority,
            state=state,
            worker=worker,
        )

        event_view.additional_properties = d
        return event_view

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
