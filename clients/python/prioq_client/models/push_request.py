from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PushRequest")


@_attrs_define
class PushRequest:
    """Where and how to push a queue's jobs.

    Example:
        {'concurrency': 8, 'timeout_ms': 30000, 'url': 'https://billing.internal/jobs'}

    Attributes:
        url (str): An absolute `http` or `https` URL, up to 2000 characters; each job
            is POSTed to it. Redirects are not followed.
        concurrency (int | None | Unset): Deliveries under way at once at most, across every instance, 1 to
            1000; default 1. Default: 1.
        lease_ms (int | None | Unset): The lease each delivery holds, extended every third of it while the
            request runs, 1000 to 3600000; default `timeout_ms`, at most 30000.
        secret (None | str | Unset): The key of the signatures, 16 to 256 characters; default the
            target's current one, or a new random one for a new target.
        timeout_ms (int | None | Unset): How long a delivery may take, 100 to 3600000; default 30000. No
            answer by then is a failed delivery. Default: 30000.
    """

    url: str
    concurrency: int | None | Unset = 1
    lease_ms: int | None | Unset = UNSET
    secret: None | str | Unset = UNSET
    timeout_ms: int | None | Unset = 30000

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        concurrency: int | None | Unset
        if isinstance(self.concurrency, Unset):
            concurrency = UNSET
        else:
            concurrency = self.concurrency

        lease_ms: int | None | Unset
        if isinstance(self.lease_ms, Unset):
            lease_ms = UNSET
        else:
            lease_ms = self.lease_ms

        secret: None | str | Unset
        if isinstance(self.secret, Unset):
            secret = UNSET
        else:
            secret = self.secret

        timeout_ms: int | None | Unset
        if isinstance(self.timeout_ms, Unset):
            timeout_ms = UNSET
        else:
            timeout_ms = self.timeout_ms

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "url": url,
            }
        )
        if concurrency is not UNSET:
            field_dict["concurrency"] = concurrency
        if lease_ms is not UNSET:
            field_dict["lease_ms"] = lease_ms
        if secret is not UNSET:
            field_dict["secret"] = secret
        if timeout_ms is not UNSET:
            field_dict["timeout_ms"] = timeout_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        url = d.pop("url")

        def _parse_concurrency(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        concurrency = _parse_concurrency(d.pop("concurrency", UNSET))

        def _parse_lease_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lease_ms = _parse_lease_ms(d.pop("lease_ms", UNSET))

        def _parse_secret(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        secret = _parse_secret(d.pop("secret", UNSET))

        def _parse_timeout_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        timeout_ms = _parse_timeout_ms(d.pop("timeout_ms", UNSET))

        push_request = cls(
            url=url,
            concurrency=concurrency,
            lease_ms=lease_ms,
            secret=secret,
            timeout_ms=timeout_ms,
        )

        return push_request
