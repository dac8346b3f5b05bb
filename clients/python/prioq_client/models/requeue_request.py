from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RequeueRequest")


@_attrs_define
class RequeueRequest:
    """Optional settings of a requeue.

    Example:
        {'priority': 3}

    Attributes:
        priority (int | None | Unset): Requeue at this priority instead of the job's own.
    """

    priority: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if priority is not UNSET:
            field_dict["priority"] = priority

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        requeue_request = cls(
            priority=priority,
        )

        return requeue_request
