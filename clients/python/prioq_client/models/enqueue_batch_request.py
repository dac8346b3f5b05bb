from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.enqueue_request import EnqueueRequest


T = TypeVar("T", bound="EnqueueBatchRequest")


@_attrs_define
class EnqueueBatchRequest:
    """Many jobs to add at once.

    Example:
        {'jobs': [{'args': {'to': 'a@example.com'}, 'id': 'order-1234', 'priority': 0, 'task': 'send_email'},
            {'priority': 9, 'task': 'nightly_digest'}]}

    Attributes:
        jobs (list[EnqueueRequest]): 1 to 1000 jobs; FIFO inside a priority follows this order.
    """

    jobs: list[EnqueueRequest]

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
        from ..models.enqueue_request import EnqueueRequest  # noqa: PLC0415

        d = dict(src_dict)
        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = EnqueueRequest.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        enqueue_batch_request = cls(
            jobs=jobs,
        )

        return enqueue_batch_request
