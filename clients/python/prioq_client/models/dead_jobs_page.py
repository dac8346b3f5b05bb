from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_view import JobView


T = TypeVar("T", bound="DeadJobsPage")


@_attrs_define
class DeadJobsPage:
    """A page of dead jobs.

    Example:
        {'jobs': [{'args': {'to': 'a@example.com'}, 'attempts': 5, 'dead_at': '2026-11-30T00:04:01.002Z', 'enqueued_at':
            '2026-11-29T23:58:12.345Z', 'group': None, 'id': 'order-1234', 'last_error': 'lease expired',
            'lease_expires_at': None, 'lease_token': None, 'max_attempts': 5, 'priority': 0, 'queue': 'emails', 'run_at':
            None, 'state': 'dead', 'task': 'send_email', 'worker': None}], 'next_cursor': '1764460841002.order-1234',
            'total': 1}

    Attributes:
        jobs (list[JobView]): Most recently dead first.
        total (int): Dead jobs in the queue.
        next_cursor (None | str | Unset): Pass as `cursor` for the next page; null on the last page.
    """

    jobs: list[JobView]
    total: int
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        total = self.total

        next_cursor: None | str | Unset
        if isinstance(self.next_cursor, Unset):
            next_cursor = UNSET
        else:
            next_cursor = self.next_cursor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "jobs": jobs,
                "total": total,
            }
        )
        if next_cursor is not UNSET:
            field_dict["next_cursor"] = next_cursor

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.job_view import JobView  # noqa: PLC0415

        d = dict(src_dict)
        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = JobView.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        total = d.pop("total")

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        dead_jobs_page = cls(
            jobs=jobs,
            total=total,
            next_cursor=next_cursor,
        )

        dead_jobs_page.additional_properties = d
        return dead_jobs_page

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
