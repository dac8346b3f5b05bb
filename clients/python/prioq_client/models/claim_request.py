from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.ack_entry import AckEntry


T = TypeVar("T", bound="ClaimRequest")


@_attrs_define
class ClaimRequest:
    """How to claim; every field is optional.

    Example:
        {'ack': [{'id': 'order-1233', 'lease_token': '4fJ2kX9qLm0aB7cD1eF3gH-1'}], 'lease_ms': 60000, 'max_jobs': 1,
            'wait_ms': 0, 'worker': 'billing-7'}

    Attributes:
        ack (list[AckEntry] | None | Unset): Jobs to acknowledge first, each by the single-ack rules (0 to 1000):
            a worker's finished job and its next claim in one request.
        lease_ms (int | None | Unset): Lease length, 100 to 43200000; default from configuration.
        max_jobs (int | None | Unset): 1 to 100; default 1.
        request_id (None | str | Unset): Makes the claim safe to retry: a claim repeated with the same
            `request_id` and `worker` while the first answer's leases run
            answers the same jobs with the same lease tokens (those still
            leased under them), leases nothing new, and applies its `ack`
            entries at most once. Send a fresh one per claim, and the same one
            when retrying a claim whose answer was lost.
        wait_ms (int | Unset): Long poll: wait up to this long (0 to 20000) for a claimable job.
        worker (None | str | Unset): Who claims, shown on the leased jobs; up to 200 characters.
    """

    ack: list[AckEntry] | None | Unset = UNSET
    lease_ms: int | None | Unset = UNSET
    max_jobs: int | None | Unset = UNSET
    request_id: None | str | Unset = UNSET
    wait_ms: int | Unset = UNSET
    worker: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        ack: list[dict[str, Any]] | None | Unset
        if isinstance(self.ack, Unset):
            ack = UNSET
        elif isinstance(self.ack, list):
            ack = []
            for ack_type_0_item_data in self.ack:
                ack_type_0_item = ack_type_0_item_data.to_dict()
                ack.append(ack_type_0_item)

        else:
            ack = self.ack

        lease_ms: int | None | Unset
        if isinstance(self.lease_ms, Unset):
            lease_ms = UNSET
        else:
            lease_ms = self.lease_ms

        max_jobs: int | None | Unset
        if isinstance(self.max_jobs, Unset):
            max_jobs = UNSET
        else:
            max_jobs = self.max_jobs

        request_id: None | str | Unset
        if isinstance(self.request_id, Unset):
            request_id = UNSET
        else:
            request_id = self.request_id

        wait_ms = self.wait_ms

        worker: None | str | Unset
        if isinstance(self.worker, Unset):
            worker = UNSET
        else:
            worker = self.worker

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if ack is not UNSET:
            field_dict["ack"] = ack
        if lease_ms is not UNSET:
            field_dict["lease_ms"] = lease_ms
        if max_jobs is not UNSET:
            field_dict["max_jobs"] = max_jobs
        if request_id is not UNSET:
            field_dict["request_id"] = request_id
        if wait_ms is not UNSET:
            field_dict["wait_ms"] = wait_ms
        if worker is not UNSET:
            field_dict["worker"] = worker

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.ack_entry import AckEntry  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_ack(data: object) -> list[AckEntry] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                ack_type_0 = []
                _ack_type_0 = data
                for ack_type_0_item_data in _ack_type_0:
                    ack_type_0_item = AckEntry.from_dict(ack_type_0_item_data)

                    ack_type_0.append(ack_type_0_item)

                return ack_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[AckEntry] | None | Unset, data)

        ack = _parse_ack(d.pop("ack", UNSET))

        def _parse_lease_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lease_ms = _parse_lease_ms(d.pop("lease_ms", UNSET))

        def _parse_max_jobs(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_jobs = _parse_max_jobs(d.pop("max_jobs", UNSET))

        def _parse_request_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        request_id = _parse_request_id(d.pop("request_id", UNSET))

        wait_ms = d.pop("wait_ms", UNSET)

        def _parse_worker(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        worker = _parse_worker(d.pop("worker", UNSET))

        claim_request = cls(
            ack=ack,
            lease_ms=lease_ms,
            max_jobs=max_jobs,
            request_id=request_id,
            wait_ms=wait_ms,
            worker=worker,
        )

        return claim_request
