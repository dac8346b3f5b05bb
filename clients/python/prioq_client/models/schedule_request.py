from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ScheduleRequest")


@_attrs_define
class ScheduleRequest:
    """A schedule: a cron pattern in a time zone, and the job each of its fire
    times enqueues.

        Example:
            {'args': {'kind': 'daily'}, 'cron': '*/5 * * * *', 'group': None, 'max_attempts': 5, 'paused': False,
                'priority': 1, 'retain_ms': 0, 'task': 'report', 'timezone': 'Europe/Berlin'}

        Attributes:
            cron (str): Five fields (minute, hour, day of month, month, day of week), or six
                with seconds first; `*`, lists, ranges, steps, names (`JAN`, `MON`),
                `L`, `#`, `W`; or `@hourly`, `@daily`, `@weekly`, `@monthly`,
                `@yearly`.
            task (str): The task of the jobs it enqueues, 1 to 200 characters.
            args (Any | Unset): Their args; default `{}`.
            group (None | str | Unset): Their group.
            max_attempts (int | None | Unset): Their deliveries before the DLQ, 1 to 1000; default from configuration.
            paused (bool | Unset): While true, the schedule fires nothing.
            priority (int | Unset): Their priority, 0 to 255; default 1. Default: 1.
            retain_ms (int | Unset): How long they are kept once acked, 0 to 2592000000 ms; default 0.
            timezone (str | Unset): An IANA time zone name; default `UTC`. Default: 'UTC'.
    """

    cron: str
    task: str
    args: Any | Unset = UNSET
    group: None | str | Unset = UNSET
    max_attempts: int | None | Unset = UNSET
    paused: bool | Unset = UNSET
    priority: int | Unset = 1
    retain_ms: int | Unset = UNSET
    timezone: str | Unset = "UTC"

    def to_dict(self) -> dict[str, Any]:
        cron = self.cron

        task = self.task

        args = self.args

        group: None | str | Unset
        if isinstance(self.group, Unset):
            group = UNSET
        else:
            group = self.group

        max_attempts: int | None | Unset
        if isinstance(self.max_attempts, Unset):
            max_attempts = UNSET
        else:
            max_attempts = self.max_attempts

        paused = self.paused

        priority = self.priority

        retain_ms = self.retain_ms

        timezone = self.timezone

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cron": cron,
                "task": task,
            }
        )
        if args is not UNSET:
            field_dict["args"] = args
        if group is not UNSET:
            field_dict["group"] = group
        if max_attempts is not UNSET:
            field_dict["max_attempts"] = max_attempts
        if paused is not UNSET:
            field_dict["paused"] = paused
        if priority is not UNSET:
            field_dict["priority"] = priority
        if retain_ms is not UNSET:
            field_dict["retain_ms"] = retain_ms
        if timezone is not UNSET:
            field_dict["timezone"] = timezone

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cron = d.pop("cron")

        task = d.pop("task")

        args = d.pop("args", UNSET)

        def _parse_group(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        group = _parse_group(d.pop("group", UNSET))

        def _parse_max_attempts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_attempts = _parse_max_attempts(d.pop("max_attempts", UNSET))

        paused = d.pop("paused", UNSET)

        priority = d.pop("priority", UNSET)

        retain_ms = d.pop("retain_ms", UNSET)

        timezone = d.pop("timezone", UNSET)

        schedule_request = cls(
            cron=cron,
            task=task,
            args=args,
            group=group,
            max_attempts=max_attempts,
            paused=paused,
            priority=priority,
            retain_ms=retain_ms,
            timezone=timezone,
        )

        return schedule_request
