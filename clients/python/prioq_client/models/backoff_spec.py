from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

from ..models.backoff_kind import BackoffKind

T = TypeVar("T", bound="BackoffSpec")


@_attrs_define
class BackoffSpec:
    """A job's backoff: after its n-th failed attempt it is `scheduled` for
    `delay_ms` (`fixed`) or `delay_ms × 2^(n−1)` (`exponential`, at most 30
    days) before it is pending again. A nack's own `delay_ms` (0 too) wins.

        Example:
            {'delay_ms': 1000, 'type': 'exponential'}

        Attributes:
            delay_ms (int): 1 to 2592000000 (30 days): the first failure's wait.
            type_ (BackoffKind): How a backoff's wait grows with the failures.
    """

    delay_ms: int
    type_: BackoffKind

    def to_dict(self) -> dict[str, Any]:
        delay_ms = self.delay_ms

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "delay_ms": delay_ms,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        delay_ms = d.pop("delay_ms")

        type_ = BackoffKind(d.pop("type"))

        backoff_spec = cls(
            delay_ms=delay_ms,
            type_=type_,
        )

        return backoff_spec
