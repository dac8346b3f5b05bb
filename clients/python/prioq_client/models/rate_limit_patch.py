from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RateLimitPatch")


@_attrs_define
class RateLimitPatch:
    """
    Attributes:
        burst (int | None | Unset): Tokens the bucket holds at most.
        per_second (float | None | Unset): Tokens the bucket gains per second.
    """

    burst: int | None | Unset = UNSET
    per_second: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        burst: int | None | Unset
        if isinstance(self.burst, Unset):
            burst = UNSET
        else:
            burst = self.burst

        per_second: float | None | Unset
        if isinstance(self.per_second, Unset):
            per_second = UNSET
        else:
            per_second = self.per_second

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if burst is not UNSET:
            field_dict["burst"] = burst
        if per_second is not UNSET:
            field_dict["per_second"] = per_second

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_burst(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        burst = _parse_burst(d.pop("burst", UNSET))

        def _parse_per_second(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        per_second = _parse_per_second(d.pop("per_second", UNSET))

        rate_limit_patch = cls(
            burst=burst,
            per_second=per_second,
        )

        return rate_limit_patch
