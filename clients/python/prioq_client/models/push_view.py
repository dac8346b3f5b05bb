from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.push_health_view import PushHealthView


T = TypeVar("T", bound="PushView")


@_attrs_define
class PushView:
    """A queue's push target and how its deliveries go.

    Example:
        {'concurrency': 8, 'health': {'consecutive_failures': 0, 'delivered': 1204, 'failed': 7, 'in_flight': 3,
            'last_error': 'push: HTTP 503: busy', 'last_failure_at': '2026-11-29T23:41:02.100Z', 'last_status': 200,
            'last_success_at': '2026-11-29T23:58:12.345Z', 'stale': 0}, 'lease_ms': 30000, 'timeout_ms': 30000, 'url':
            'https://billing.internal/jobs'}

    Attributes:
        concurrency (int):
        health (PushHealthView): How a target's deliveries go, across every instance.
        lease_ms (int):
        timeout_ms (int):
        url (str):
        secret (None | str | Unset): The signatures' key: in the answer to a `PUT` only.
    """

    concurrency: int
    health: PushHealthView
    lease_ms: int
    timeout_ms: int
    url: str
    secret: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        concurrency = self.concurrency

        health = self.health.to_dict()

        lease_ms = self.lease_ms

        timeout_ms = self.timeout_ms

        url = self.url

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "concurrency": concurrency,
                "health": health,
                "lease_ms": lease_ms,
                "timeout_ms": timeout_ms,
                "url": url,
            }
        )
        if secret is not UNSET:
            field_dict["secret"] = secret

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.push_health_view import PushHealthView  # noqa: PLC0415

        d = dict(src_dict)
        concurrency = d.pop("concurrency")

        health = PushHealthView.from_dict(d.pop("health"))

        lease_ms = d.pop("lease_ms")

        timeout_ms = d.pop("timeout_ms")

        url = d.pop("url")

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

        push_view = cls(
            concurrency=concurrency,
            health=health,
            lease_ms=lease_ms,
            timeout_ms=timeout_ms,
            url=url,
            secret=secret,
        )

        push_view.additional_properties = d
        return push_view

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
