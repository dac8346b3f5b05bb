from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AckEntry")


@_attrs_define
class AckEntry:
    """
    Attributes:
        id (str):
        lease_token (str):
        result (Any | Unset): Any JSON value, at most 64 KiB as sent: kept with the job while it
            is retained, dropped otherwise.
    """

    id: str
    lease_token: str
    result: Any | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        lease_token = self.lease_token

        result = self.result

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "id": id,
                "lease_token": lease_token,
            }
        )
        if result is not UNSET:
            field_dict["result"] = result

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        id = d.pop("id")

        lease_token = d.pop("lease_token")

        result = d.pop("result", UNSET)

        ack_entry = cls(
            id=id,
            lease_token=lease_token,
            result=result,
        )

        return ack_entry
