from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.ack_entry import AckEntry


T = TypeVar("T", bound="AckManyRequest")


@_attrs_define
class AckManyRequest:
    """Many acknowledgements.

    Example:
        {'jobs': [{'id': 'order-1234', 'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1'}, {'id': 'order-1235',
            'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-2'}]}

    Attributes:
        jobs (list[AckEntry]): 1 to 1000 entries.
    """

    jobs: list[AckEntry]

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "jobs": jobs,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ack_entry import AckEntry  # noqa: PLC0415

        d = dict(src_dict)
        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = AckEntry.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        ack_many_request = cls(
            jobs=jobs,
        )

        return ack_many_request
