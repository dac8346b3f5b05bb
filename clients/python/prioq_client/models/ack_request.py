from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AckRequest")


@_attrs_define
class AckRequest:
    """Proof of the current lease, and what the job produced.

    Example:
        {'lease_token': '9f1c0e6a2b7d4c3e8a5f1b2c3d4e5f60-1', 'result': {'sent': True}}

    Attributes:
        lease_token (str):
        result (Any | Unset): Any JSON value, at most 64 KiB as sent: kept with the job while it
            is retained (see `retain_ms`), dropped otherwise.
    """

    lease_token: str
    result: Any | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        lease_token = self.lease_token

        result = self.result

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lease_token": lease_token,
            }
        )
        if result is not UNSET:
            field_dict["result"] = result

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        lease_token = d.pop("lease_token")

        result = d.pop("result", UNSET)

        ack_request = cls(
            lease_token=lease_token,
            result=result,
        )

        return ack_request
