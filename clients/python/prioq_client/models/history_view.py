from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.event_view import EventView


T = TypeVar("T", bound="HistoryView")


@_attrs_define
class HistoryView:
    """A job's history, oldest event first.

    Example:
        {'events': [{'at': '2026-11-29T23:58:12.345Z', 'event': 'enqueued', 'priority': 0}, {'at':
            '2026-11-29T23:58:12.351Z', 'event': 'claimed', 'fence': 1796417467412853, 'worker': 'billing-7'}, {'at':
            '2026-11-29T23:58:14.002Z', 'error': 'timeout talking to SMTP', 'event': 'nacked', 'state': 'scheduled'}, {'at':
            '2026-11-29T23:58:19.010Z', 'event': 'claimed', 'fence': 1796417474010112, 'worker': 'billing-3'}, {'at':
            '2026-11-29T23:58:19.420Z', 'event': 'acked'}], 'id': 'order-1234'}

    Attributes:
        events (list[EventView]): Up to the last 100 events; empty when the queue keeps no history
            (`history_ms` 0, the default), or it lapsed, while the job exists.
        id (str):
    """

    events: list[EventView]
    id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        events = []
        for events_item_data in self.events:
            events_item = events_item_data.to_dict()
            events.append(events_item)

        id = self.id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "events": events,
                "id": id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.event_view import EventView  # noqa: PLC0415

        d = dict(src_dict)
        events = []
        _events = d.pop("events")
        for events_item_data in _events:
            events_item = EventView.from_dict(events_item_data)

            events.append(events_item)

        id = d.pop("id")

        history_view = cls(
            events=events,
            id=id,
        )

        history_view.additional_properties = d
        return history_view

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
