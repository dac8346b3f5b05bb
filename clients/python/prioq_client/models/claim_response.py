from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.ack_result import AckResult
    from ..models.job_view import JobView


T = TypeVar("T", bound="ClaimResponse")


@_attrs_define
class ClaimResponse:
    """The leased jobs, and the outcome of each ack the claim brought.

    Example:
        {'acked': [{'id': 'order-1233', 'status': 204}], 'jobs': [{'args': {'to': 'a@example.com'}, 'attempts': 0,
            'enqueued_at': '2026-11-29T23:58:12.345Z', 'group': None, 'id': 'order-1234', 'last_error': None,
            'lease_expires_at': '2026-11-29T23:59:12.345Z', 'lease_token': '9f1c0e6a2b7d4c3e8a5f1b-1', 'max_attempts': 5,
            'priority': 0, 'queue': 'emails', 'run_at': None, 'state': 'processing', 'task': 'send_email', 'worker':
            'billing-7'}]}

    Attributes:
        jobs (list[JobView]): State `processing`, with their lease tokens; empty when nothing was
            claimable.
        acked (list[AckResult] | None | Unset): One result per entry of `ack`, in request order; only when `ack` was
            sent.
        skipped_shards (list[int] | Unset): On a sharded queue, the shards the claim could not reach (their
            Redis failing over, say) and went on without: their jobs may have
            been passed over by the jobs answered. Absent when none.
    """

    jobs: list[JobView]
    acked: list[AckResult] | None | Unset = UNSET
    skipped_shards: list[int] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        jobs = []
        for jobs_item_data in self.jobs:
            jobs_item = jobs_item_data.to_dict()
            jobs.append(jobs_item)

        acked: list[dict[str, Any]] | None | Unset
        if isinstance(self.acked, Unset):
            acked = UNSET
        elif isinstance(self.acked, list):
            acked = []
            for acked_type_0_item_data in self.acked:
                acked_type_0_item = acked_type_0_item_data.to_dict()
                acked.append(acked_type_0_item)

        else:
            acked = self.acked

        skipped_shards: list[int] | Unset = UNSET
        if not isinstance(self.skipped_shards, Unset):
            skipped_shards = self.skipped_shards

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "jobs": jobs,
            }
        )
        if acked is not UNSET:
            field_dict["acked"] = acked
        if skipped_shards is not UNSET:
            field_dict["skipped_shards"] = skipped_shards

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ack_result import AckResult  # noqa: PLC0415
        from ..models.job_view import JobView  # noqa: PLC0415

        d = dict(src_dict)
        jobs = []
        _jobs = d.pop("jobs")
        for jobs_item_data in _jobs:
            jobs_item = JobView.from_dict(jobs_item_data)

            jobs.append(jobs_item)

        def _parse_acked(data: object) -> list[AckResult] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                acked_type_0 = []
                _acked_type_0 = data
                for acked_type_0_item_data in _acked_type_0:
                    acked_type_0_item = AckResult.from_dict(acked_type_0_item_data)

                    acked_type_0.append(acked_type_0_item)

                return acked_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[AckResult] | None | Unset, data)

        acked = _parse_acked(d.pop("acked", UNSET))

        skipped_shards = cast(list[int], d.pop("skipped_shards", UNSET))

        claim_response = cls(
            jobs=jobs,
            acked=acked,
            skipped_shards=skipped_shards,
        )

        claim_response.additional_properties = d
        return claim_response

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
