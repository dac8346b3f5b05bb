from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ScaleView")


@_attrs_define
class ScaleView:
    """What an autoscaler reads of a queue, in the shape KEDA's `metrics-api`
    scaler reads (`valueLocation: desired_workers`, or any other field).

        Example:
            {'desired_workers': 13, 'oldest_pending_age_ms': 5300, 'pending': 120, 'processing': 8}

        Attributes:
            desired_workers (int): ceil((pending + processing) / per_worker).
            oldest_pending_age_ms (int): How long the longest-waiting next job of any priority has waited
                (0 when none is pending).
            pending (int):
            processing (int):
    """

    desired_workers: int
    oldest_pending_age_ms: int
    pending: int
    processing: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        desired_workers = self.desired_workers

        oldest_pending_age_ms = self.oldest_pending_age_ms

        pending = self.pending

        processing = self.processing

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "desired_workers": desired_workers,
                "oldest_pending_age_ms": oldest_pending_age_ms,
                "pending": pending,
                "processing": processing,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        desired_workers = d.pop("desired_workers")

        oldest_pending_age_ms = d.pop("oldest_pending_age_ms")

        pending = d.pop("pending")

        processing = d.pop("processing")

        scale_view = cls(
            desired_workers=desired_workers,
            oldest_pending_age_ms=oldest_pending_age_ms,
            pending=pending,
            processing=processing,
        )

        scale_view.additional_properties = d
        return scale_view

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
