from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ExtendRequest")


@_attrs_define
class ExtendRequest:
    """A heartbeat: keep the lease for `lease_ms` from now, and say how far
    the work got.

        Example:
            {'lease_ms': 60000, 'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1', 'progress': {'done': 40, 'of': 100}}

        Attributes:
            lease_token (str):
            lease_ms (int | None | Unset): 100 to 43200000; default from configuration.
            progress (Any | Unset): Any JSON value, at most 4 KiB as sent: shown as the job's `progress`
                until the job ends.
    """

    lease_token: str
    lease_ms: int | None | Unset = UNSET
    progress: Any | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        lease_token = self.lease_token

        lease_ms: int | None | Unset
        if isinstance(self.lease_ms, Unset):
            lease_ms = UNSET
        else:
            lease_ms = self.lease_ms

        progress = self.progress

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lease_token": lease_token,
            }
        )
        if lease_ms is not UNSET:
            field_dict["lease_ms"] = lease_ms
        if progress is not UNSET:
            field_dict["progress"] = progress

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        lease_token = d.pop("lease_token")

        def _parse_lease_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lease_ms = _parse_lease_ms(d.pop("lease_ms", UNSET))

        progress = d.pop("progress", UNSET)

        extend_request = cls(
            lease_token=lease_token,
            lease_ms=lease_ms,
            progress=progress,
        )

        return extend_request
