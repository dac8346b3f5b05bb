from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ScheduleView")


@_attrs_define
class ScheduleView:
    """A schedule as it stands.

    Example:
        {'args': {}, 'cron': '0 2 * * *', 'group': None, 'last_job_id': 'nightly-report:1764464400000', 'last_run_at':
            '2026-11-30T01:00:00.000Z', 'max_attempts': 5, 'name': 'nightly-report', 'next_run_at':
            '2026-12-01T01:00:00.000Z', 'paused': False, 'priority': 1, 'queue': 'reports', 'retain_ms': 0, 'task':
            'report', 'timezone': 'Europe/Berlin'}

    Attributes:
        args (Any):
        cron (str):
        max_attempts (int):
        name (str):
        paused (bool):
        priority (int):
        queue (str):
        retain_ms (int):
        task (str):
        timezone (str):
        group (None | str | Unset):
        last_job_id (None | str | Unset): The id of that job: `{name}:{fire time in ms since the epoch}`.
        last_run_at (None | str | Unset): Its last fire time that enqueued a job; null before the first.
        next_run_at (None | str | Unset): When it fires next; null while paused.
    """

    args: Any
    cron: str
    max_attempts: int
    name: str
    paused: bool
    priority: int
    queue: str
    retain_ms: int
    task: str
    timezone: str
    group: None | str | Unset = UNSET
    last_job_id: None | str | Unset = UNSET
    last_run_at: None | str | Unset = UNSET
    next_run_at: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        args = self.args

        cron = self.cron

        max_attempts = self.max_attempts

        name = self.name

        paused = self.paused

        priority = self.priority

        queue = self.queue

        retain_ms = self.retain_ms

        task = self.task

        timezone = self.timezone

        group: None | str | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        else:
            group = self.group

        last_job_id: None | str | Unset
        if isinstance(self.last_job_id, Unset):
            last_job_id = UNSET
        else:
            last_job_id = self.last_job_id

        last_run_at: None | str | Unset
        if isinstance(self.last_run_at, Unset):
            last_run_at = UNSET
        else:
            last_run_at = self.last_run_at

        next_run_at: None | str | Unset
        if isinstance(self.next_run_at, Unset):
            next_run_at = UNSET
        else:
            next_run_at = self.next_run_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "args": args,
                "cron": cron,
                "max_attempts": max_attempts,
                "name": name,
                "paused": paused,
                "priority": priority,
                "queue": queue,
                "retain_ms": retain_ms,
                "task": task,
                "timezone": timezone,
            }
        )
        if group is not UNSET:
            field_dict["group"] = group
        if last_job_id is not UNSET:
            field_dict["last_job_id"] = last_job_id
        if last_run_at is not UNSET:
            field_dict["last_run_at"] = last_run_at
        if next_run_at is not UNSET:
            field_dict["next_run_at"] = next_run_at

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        args = d.pop("args")

        cron = d.pop("cron")

        max_attempts = d.pop("max_attempts")

        name = d.pop("name")

        paused = d.pop("paused")

        priority = d.pop("priority")

        queue = d.pop("queue")

        retain_ms = d.pop("retain_ms")

        task = d.pop("task")

        timezone = d.pop("timezone")

        def _parse_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_last_job_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_job_id = _parse_last_job_id(d.pop("last_job_id", UNSET))

        def _parse_last_run_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_run_at = _parse_last_run_at(d.pop("last_run_at", UNSET))

        def _parse_next_run_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_run_at = _parse_next_run_at(d.pop("next_run_at", UNSET))

        schedule_view = cls(
            args=args,
            cron=cron,
            max_attempts=max_attempts,
            name=name,
            paused=paused,
            priority=priority,
            queue=queue,
            retain_ms=retain_ms,
            task=task,
            timezone=timezone,
            group=group,
            last_job_id=last_job_id,
            last_run_at=last_run_at,
            next_run_at=next_run_at,
        )

        schedule_view.additional_properties = d
        return schedule_view

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
