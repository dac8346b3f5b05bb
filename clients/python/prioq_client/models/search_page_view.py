from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_view import JobView


T = TypeVar("T", bound="SearchPageView")


@_attrs_define
class SearchPageView:
    """A page of the jobs found.

    Example:
        {'jobs': [{'args': {'tenant': 'acme', 'to': 'a@example.com'}, 'attempts': 5, 'enqueued_at':
            '2026-11-29T23:58:12.345Z', 'group': 'acme', 'id': 'order-1234', 'last_error': 'smtp timeout',
            'lease_expires_at': None, 'lease_token': None, 'max_attempts': 5, 'priority': 0, 'queue': 'emails', 'run_at':
            None, 'state': 'dead', 'task': 'send_email', 'worker': None}], 'next_cursor': '0.1536', 'scanned': 10000}

    Attributes:
        jobs (list[JobView]): The jobs found, in no particular order.
        scanned (int): The jobs this page looked at.
        next_cursor (None | str | Unset): Pass as `cursor` for the next page; null once every job was looked
            at. A page may hold fewer jobs than asked (even none) and still
            have a next one: it stops after looking at 10,000 jobs.
    """

    jobs: list[JobView]
    scanned: int
    next_cursor: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        scanned = self.scanned

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
                "scanned": scanned,
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

        scanned = d.pop("scanned")

        def _parse_next_cursor(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        next_cursor = _parse_next_cursor(d.pop("next_cursor", UNSET))

        search_page_view = cls(
            jobs=jobs,
            scanned=scanned,
            next_cursor=next_cursor,
        )

        search_page_view.additional_properties = d
        return search_page_view

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
