from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.class_view import ClassView
    from ..models.push_view import PushView


T = TypeVar("T", bound="QueueView")


@_attrs_define
class QueueView:
    """One queue's counts.

    Example:
        {'classes': [{'oldest_age_ms': 1530, 'pending': 2, 'priority': 0}, {'oldest_age_ms': 64200, 'pending': 10,
            'priority': 9}], 'completed': 0, 'dead': 1, 'expired_leases': 0, 'groups': 2, 'paused': False, 'pending': 12,
            'processing': 3, 'push': None, 'queue': 'emails', 'scheduled': 0, 'shards': 1}

    Attributes:
        classes (list[ClassView]): Pending jobs per priority, most urgent first.
        completed (int): Jobs acked and kept until their retention ends.
        dead (int):
        expired_leases (int): Leases past their deadline that the sweeper has not taken back yet.
        groups (int): Named groups with jobs pending or processing.
        paused (bool): Whether claims are paused.
        pending (int):
        processing (int):
        queue (str):
        scheduled (int):
        shards (int): The number of Redis hash slots the queue's jobs are spread over
            (its `shards` setting).
        waiting (int): Jobs waiting for their dependencies (never claimed until released).
        pending_bytes (int | None | Unset): The bytes of the waiting jobs counted against `max_pending_bytes`
            (those that entered waiting since it was set); null when the queue
            has no such bound.
        push (None | PushView | Unset):
    """

    classes: list[ClassView]
    completed: int
    dead: int
    expired_leases: int
    groups: int
    paused: bool
    pending: int
    processing: int
    queue: str
    scheduled: int
    shards: int
    waiting: int
    pending_bytes: int | None | Unset = UNSET
    push: None | PushView | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.push_view import PushView  # noqa: PLC0415

        classes = []
        for classes_item_data in self.classes:
            classes_item = classes_item_data.to_dict()
            classes.append(classes_item)

        completed = self.completed

        dead = self.dead

        expired_leases = self.expired_leases

        groups = self.groups

        paused = self.paused

        pending = self.pending

        processing = self.processing

        queue = self.queue

        scheduled = self.scheduled

        shards = self.shards

        waiting = self.waiting

        pending_bytes: int | None | Unset
        if isinstance(self.pending_bytes, Unset):
            pending_bytes = UNSET
        else:
            pending_bytes = self.pending_bytes

        push: dict[str, Any] | None | Unset
        if isinstance(self.push, Unset):
            push = UNSET
        elif isinstance(self.push, PushView):
            push = self.push.to_dict()
        else:
            push = self.push

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "classes": classes,
                "completed": completed,
                "dead": dead,
                "expired_leases": expired_leases,
                "groups": groups,
                "paused": paused,
                "pending": pending,
                "processing": processing,
                "queue": queue,
                "scheduled": scheduled,
                "shards": shards,
                "waiting": waiting,
            }
        )
        if pending_bytes is not UNSET:
            field_dict["pending_bytes"] = pending_bytes
        if push is not UNSET:
            field_dict["push"] = push

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.class_view import ClassView  # noqa: PLC0415
        from ..models.push_view import PushView  # noqa: PLC0415

        d = dict(src_dict)
        classes = []
        _classes = d.pop("classes")
        for classes_item_data in _classes:
            classes_item = ClassView.from_dict(classes_item_data)

            classes.append(classes_item)

        completed = d.pop("completed")

        dead = d.pop("dead")

        expired_leases = d.pop("expired_leases")

        groups = d.pop("groups")

        paused = d.pop("paused")

        pending = d.pop("pending")

        processing = d.pop("processing")

        queue = d.pop("queue")

        scheduled = d.pop("scheduled")

        shards = d.pop("shards")

        waiting = d.pop("waiting")

        def _parse_pending_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pending_bytes = _parse_pending_bytes(d.pop("pending_bytes", UNSET))

        def _parse_push(data: object) -> None | PushView | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                push_type_0 = PushView.from_dict(data)

                return push_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PushView | Unset, data)

        push = _parse_push(d.pop("push", UNSET))

        queue_view = cls(
            classes=classes,
            completed=completed,
            dead=dead,
            expired_leases=expired_leases,
            groups=groups,
            paused=paused,
            pending=pending,
            processing=processing,
            queue=queue,
            scheduled=scheduled,
            shards=shards,
            waiting=waiting,
            pending_bytes=pending_bytes,
            push=push,
        )

        queue_view.additional_properties = d
        return queue_view

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
