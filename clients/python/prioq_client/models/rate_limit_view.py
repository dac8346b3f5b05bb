from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RateLimitView")


@_attrs_define
class RateLimitView:
    """
    Attributes:
        burst (int): Tokens the bucket holds at most.
        per_second (float): Tokens the bucket gains per second.
    """

    burst: int
    per_second: float
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        burst = self.burst

        per_second = self.per_second

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "burst": burst,
                "per_second": per_second,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        burst = d.pop("burst")

        per_second = d.pop("per_second")

        rate_limit_view = cls(
            burst=burst,
            per_second=per_second,
        )

        rate_limit_view.additional_properties = d
        return rate_limit_view

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
