from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ClassView")


@_attrs_define
class ClassView:
    """One priority class of the pending jobs.

    Attributes:
        oldest_age_ms (int): How long the class's next job in line has waited; the starvation
            signal. With groups, the fair order may put a small group's newer
            job before a big group's older ones.
        pending (int):
        priority (int):
    """

    oldest_age_ms: int
    pending: int
    priority: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        oldest_age_ms = self.oldest_age_ms

        pending = self.pending

        priority = self.priority

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "oldest_age_ms": oldest_age_ms,
                "pending": pending,
                "priority": priority,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        oldest_age_ms = d.pop("oldest_age_ms")

        pending = d.pop("pending")

        priority = d.pop("priority")

        class_view = cls(
            oldest_age_ms=oldest_age_ms,
            pending=pending,
            priority=priority,
        )

        class_view.additional_properties = d
        return class_view

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
