from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.rate_limit_view import RateLimitView
    from ..models.settings_view_group_weights import SettingsViewGroupWeights


T = TypeVar("T", bound="SettingsView")


@_attrs_define
class SettingsView:
    """How a queue hands out its jobs.

    Example:
        {'group_max_in_flight': 10, 'group_weights': {'tenant-42': 5}, 'max_in_flight': 200, 'paused': False,
            'rate_limit': {'burst': 50, 'per_second': 50.0}, 'retain_ms': 86400000, 'shards': 1}

    Attributes:
        group_max_in_flight (int | None): Jobs of one named group processing at once at most, fleet-wide.
        group_rate_limit (None | RateLimitView):
        group_weights (SettingsViewGroupWeights): Groups' weights in their fair share inside a priority; they apply to
            jobs enqueued after the change.
        history_ms (int): How long a job's history is kept after its last event (ms; 0: none is kept): its enqueue, each
            claim with its worker and fence, each nack and lease expiry with its error, and its end, up to its last 100
            events, read with `GET …/jobs/{id}/history`. Applies to events after it is set; each event costs one write to
            Redis.
        max_in_flight (int | None): Jobs of the queue processing at once at most, fleet-wide.
        max_pending (int | None): Jobs waiting to be handed out (pending, scheduled, or waiting for their dependencies)
            at most: an enqueue whose new jobs would go past it answers 429 `queue_full` and changes nothing. A queue split
            over K shards bounds each shard at ⌈max_pending / K⌉.
        max_pending_bytes (int | None): Bytes of waiting jobs at most, counted as stored: each job's task, args as sent
            and trace context (pending, scheduled, or waiting for their dependencies). An enqueue whose new jobs would go
            past it answers 429 `queue_full` and changes nothing. Counts the jobs that enter waiting once it is set
            (enqueued, or back from a lease's end or the DLQ); a replace by dedup key is admitted whatever it. A queue split
            over K shards bounds each shard at ⌈max_pending_bytes / K⌉.
        max_wait_ms (int | None): Priority aging: a job without a group that waits this long (ms) in its priority is
            claimed as if it had the next more urgent one, at its front (after the jobs that aged into it before), and so
            on: a job of priority p is claimed as priority 0 after p × max_wait_ms at most. Applies to jobs that enter
            pending once it is set.
        paused (bool): While true, claims hand out nothing; enqueue, ack, extend, nack and the sweeper go on.
        rate_limit (None | RateLimitView):
        retain_ms (int): How long jobs enqueued without a `retain_ms` of their own are kept once acked (ms; 0: deleted
            on ack).
        shards (int): The number of Redis hash slots the queue's jobs are spread over. Changes only while the queue
            holds no job in any state, else 409 and nothing changes.
    """

    group_max_in_flight: int | None
    group_rate_limit: None | RateLimitView
    group_weights: SettingsViewGroupWeights
    history_ms: int
    max_in_flight: int | None
    max_pending: int | None
    max_pending_bytes: int | None
    max_wait_ms: int | None
    paused: bool
    rate_limit: None | RateLimitView
    retain_ms: int
    shards: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.rate_limit_view import RateLimitView  # noqa: PLC0415

        group_max_in_flight: int | None
        group_max_in_flight = self.group_max_in_flight

        group_rate_limit: dict[str, Any] | None
        if isinstance(self.group_rate_limit, RateLimitView):
            group_rate_limit = self.group_rate_limit.to_dict()
        else:
            group_rate_limit = self.group_rate_limit

        group_weights = self.group_weights.to_dict()

        history_ms = self.history_ms

        max_in_flight: int | None
        max_in_flight = self.max_in_flight

        max_pending: int | None
        max_pending = self.max_pending

        max_pending_bytes: int | None
        max_pending_bytes = self.max_pending_bytes

        max_wait_ms: int | None
        max_wait_ms = self.max_wait_ms

        paused = self.paused

        rate_limit: dict[str, Any] | None
        if isinstance(self.rate_limit, RateLimitView):
            rate_limit = self.rate_limit.to_dict()
        else:
            rate_limit = self.rate_limit

        retain_ms = self.retain_ms

        shards = self.shards

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "group_max_in_flight": group_max_in_flight,
                "group_rate_limit": group_rate_limit,
                "group_weights": group_weights,
                "history_ms": history_ms,
                "max_in_flight": max_in_flight,
                "max_pending": max_pending,
                "max_pending_bytes": max_pending_bytes,
                "max_wait_ms": max_wait_ms,
                "paused": paused,
                "rate_limit": rate_limit,
                "retain_ms": retain_ms,
                "shards": shards,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.rate_limit_view import RateLimitView  # noqa: PLC0415
        from ..models.settings_view_group_weights import SettingsViewGroupWeights  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_group_max_in_flight(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        group_max_in_flight = _parse_group_max_in_flight(d.pop("group_max_in_flight"))

        def _parse_group_rate_limit(data: object) -> None | RateLimitView:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                group_rate_limit_type_0 = RateLimitView.from_dict(data)

                return group_rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimitView, data)

        group_rate_limit = _parse_group_rate_limit(d.pop("group_rate_limit"))

        group_weights = SettingsViewGroupWeights.from_dict(d.pop("group_weights"))

        history_ms = d.pop("history_ms")

        def _parse_max_in_flight(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight"))

        def _parse_max_pending(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_pending = _parse_max_pending(d.pop("max_pending"))

        def _parse_max_pending_bytes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_pending_bytes = _parse_max_pending_bytes(d.pop("max_pending_bytes"))

        def _parse_max_wait_ms(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        max_wait_ms = _parse_max_wait_ms(d.pop("max_wait_ms"))

        paused = d.pop("paused")

        def _parse_rate_limit(data: object) -> None | RateLimitView:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rate_limit_type_0 = RateLimitView.from_dict(data)

                return rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimitView, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit"))

        retain_ms = d.pop("retain_ms")

        shards = d.pop("shards")

        settings_view = cls(
            group_max_in_flight=group_max_in_flight,
            group_rate_limit=group_rate_limit,
            group_weights=group_weights,
            history_ms=history_ms,
            max_in_flight=max_in_flight,
            max_pending=max_pending,
            max_pending_bytes=max_pending_bytes,
            max_wait_ms=max_wait_ms,
            paused=paused,
            rate_limit=rate_limit,
            retain_ms=retain_ms,
            shards=shards,
        )

        settings_view.additional_properties = d
        return settings_view

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
