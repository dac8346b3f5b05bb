from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PushHealthView")


@_attrs_define
class PushHealthView:
    """How a target's deliveries go, across every instance.

    Attributes:
        consecutive_failures (int): Failed or stale deliveries since the last one delivered.
        delivered (int): Deliveries answered 2xx and acked.
        failed (int): Deliveries answered otherwise, or not at all, and nacked.
        in_flight (int): Deliveries under way now.
        stale (int): Deliveries whose lease ran out before they ended: their jobs were
            taken back and are delivered again.
        last_error (None | str | Unset): Why the last failed delivery failed; null before any.
        last_failure_at (None | str | Unset):
        last_status (int | None | Unset): The HTTP status of the last delivery that ended; 0 when no answer
            came; null before any.
        last_success_at (None | str | Unset):
    """

    consecutive_failures: int
    delivered: int
    failed: int
    in_flight: int
    stale: int
    last_error: None | str | Unset = UNSET
    last_failure_at: None | str | Unset = UNSET
    last_status: int | None | Unset = UNSET
    last_success_at: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        consecutive_failures = self.consecutive_failures

        delivered = self.delivered

        failed = self.failed

        in_flight = self.in_flight

        stale = self.stale

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        last_failure_at: None | str | Unset
        if isinstance(self.last_failure_at, Unset):
            last_failure_at = UNSET
        else:
            last_failure_at = self.last_failure_at

        last_status: int | None | Unset
        if isinstance(self.last_status, Unset):
            last_status = UNSET
        else:
            last_status = self.last_status

        last_success_at: None | str | Unset
        if isinstance(self.last_success_at, Unset):
            last_success_at = UNSET
        else:
            last_success_at = self.last_success_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "consecutive_failures": consecutive_failures,
                "delivered": delivered,
                "failed": failed,
                "in_flight": in_flight,
                "stale": stale,
            }
        )
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if last_failure_at is not UNSET:
            field_dict["last_failure_at"] = last_failure_at
        if last_status is not UNSET:
            field_dict["last_status"] = last_status
        if last_success_at is not UNSET:
            field_dict["last_success_at"] = last_success_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        consecutive_failures = d.pop("consecutive_failures")

        delivered = d.pop("delivered")

        failed = d.pop("failed")

        in_flight = d.pop("in_flight")

        stale = d.pop("stale")

        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

        def _parse_last_failure_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_failure_at = _parse_last_failure_at(d.pop("last_failure_at", UNSET))

        def _parse_last_status(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_status = _parse_last_status(d.pop("last_status", UNSET))

        def _parse_last_success_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_success_at = _parse_last_success_at(d.pop("last_success_at", UNSET))

        push_health_view = cls(
            consecutive_failures=consecutive_failures,
            delivered=delivered,
            failed=failed,
            in_flight=in_flight,
            stale=stale,
            last_error=last_error,
            last_failure_at=last_failure_at,
            last_status=last_status,
            last_success_at=last_success_at,
        )

        push_health_view.additional_properties = d
        return push_health_view

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
