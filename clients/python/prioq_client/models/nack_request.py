from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="NackRequest")


@_attrs_define
class NackRequest:
    """Give a job back without success.

    Example:
        {'dead': False, 'delay_ms': 0, 'error': 'timeout talking to SMTP', 'lease_token': '…'}

    Attributes:
        lease_token (str):
        dead (bool | Unset): Dead-letter the job now.
        delay_ms (int | None | Unset): Keep the job scheduled this long before it is claimable again;
            default the job's `backoff` (none: 0).
        error (None | str | Unset): Kept as the job's `last_error`; up to 2000 characters.
        priority (int | None | Unset): Requeue at this priority instead of the job's own.
    """

    lease_token: str
    dead: bool | Unset = UNSET
    delay_ms: int | None | Unset = UNSET
    error: None | str | Unset = UNSET
    priority: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        lease_token = self.lease_token

        dead = self.dead

        delay_ms: int | None | Unset
        if isinstance(self.delay_ms, Unset):
            delay_ms = UNSET
        else:
            delay_ms = self.delay_ms

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lease_token": lease_token,
            }
        )
        if dead is not UNSET:
            field_dict["dead"] = dead
        if delay_ms is not UNSET:
            field_dict["delay_ms"] = delay_ms
        if error is not UNSET:
            field_dict["error"] = error
        if priority is not UNSET:
            field_dict["priority"] = priority

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        lease_token = d.pop("lease_token")

        dead = d.pop("dead", UNSET)

        def _parse_delay_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delay_ms = _parse_delay_ms(d.pop("delay_ms", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        nack_request = cls(
            lease_token=lease_token,
            dead=dead,
            delay_ms=delay_ms,
            error=error,
            priority=priority,
        )

        return nack_request
