from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="GroupView")


@_attrs_define
class GroupView:
    """
    Attributes:
        group (str):
        pending (int):
        processing (int):
        weight (int): Its weight in the fair share of a priority class.
    """

    group: str
    pending: int
    processing: int
    weight: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        group = self.group

        pending = self.pending

        processing = self.processing

        weight = self.weight

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "group": group,
                "pending": pending,
                "processing": processing,
                "weight": weight,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        group = d.pop("group")

        pending = d.pop("pending")

        processing = d.pop("processing")

        weight = d.pop("weight")

        group_view = cls(
            group=group,
            pending=pending,
            processing=processing,
            weight=weight,
        )

        group_view.additional_properties = d
        return group_view

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
