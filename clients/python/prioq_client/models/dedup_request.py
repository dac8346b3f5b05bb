from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.dedup_mode import DedupMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="DedupRequest")


@_attrs_define
class DedupRequest:
    """A job's dedup key. The job that takes it holds it while it is pending,
    scheduled or processing, and until `ttl_ms` has passed since its
    enqueue; a job deleted, or dropped on expiry, lets it go at once.

        Example:
            {'key': 'refresh-user-42', 'mode': 'drop', 'ttl_ms': 60000}

        Attributes:
            key (str): 1 to 128 of A-Z a-z 0-9 _ . : -
            mode (DedupMode | Unset): What an enqueue does when its key is held.
            ttl_ms (int | Unset): How long the key stays held after its job's enqueue, even once the
                job ended: 0 to 2592000000 (30 days); default 0.
    """

    key: str
    mode: DedupMode | Unset = UNSET
    ttl_ms: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        ttl_ms = self.ttl_ms

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "key": key,
            }
        )
        if mode is not UNSET:
            field_dict["mode"] = mode
        if ttl_ms is not UNSET:
            field_dict["ttl_ms"] = ttl_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        key = d.pop("key")

        _mode = d.pop("mode", UNSET)
        mode: DedupMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = DedupMode(_mode)

        ttl_ms = d.pop("ttl_ms", UNSET)

        dedup_request = cls(
            key=key,
            mode=mode,
            ttl_ms=ttl_ms,
        )

        return dedup_request
