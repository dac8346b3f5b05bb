from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.queue_view import QueueView


T = TypeVar("T", bound="QueueList")


@_attrs_define
class QueueList:
    """Every queue.

    Example:
        {'queues': [{'classes': [{'oldest_age_ms': 1530, 'pending': 2, 'priority': 0}, {'oldest_age_ms': 64200,
            'pending': 10, 'priority': 9}], 'completed': 0, 'dead': 1, 'expired_leases': 0, 'groups': 2, 'paused': False,
            'pending': 12, 'processing': 3, 'queue': 'emails', 'scheduled': 0}]}

    Attributes:
        queues (list[QueueView]):
    """

    queues: list[QueueView]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        queues = []
        for queues_item_data in self.queues:
            queues_item = queues_item_data.to_dict()
            queues.append(queues_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "queues": queues,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.queue_view import QueueView  # noqa: PLC0415

        d = dict(src_dict)
        queues = []
        _queues = d.pop("queues")
        for queues_item_data in _queues:
            queues_item = QueueView.from_dict(queues_item_data)

            queues.append(queues_item)

        queue_list = cls(
            queues=queues,
        )

        queue_list.additional_properties = d
        return queue_list

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
