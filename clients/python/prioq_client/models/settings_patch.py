from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.rate_limit_patch import RateLimitPatch
    from ..models.settings_patch_group_weights_type_0 import SettingsPatchGroupWeightsType0


T = TypeVar("T", bound="SettingsPatch")


@_attrs_define
class SettingsPatch:
    """A JSON merge patch of the settings: a field left out stays as it is, `null` resets it to its default.

    Example:
        {'group_weights': {'tenant-42': 5, 'tenant-7': None}, 'max_in_flight': 200, 'rate_limit': {'burst': 50,
            'per_second': 50.0}}

    Attributes:
        group_max_in_flight (int | None | Unset): Jobs of one named group processing at once at most, fleet-wide.
        group_rate_limit (None | RateLimitPatch | Unset):
        group_weights (None | SettingsPatchGroupWeightsType0 | Unset): Groups' weights in their fair share inside a
            priority; they apply to jobs enqueued after the change.
        history_ms (int | None | Unset): How long a job's history is kept after its last event (ms; 0: none is kept):
            its enqueue, each claim with its worker and fence, each nack and lease expiry with its error, and its end, up to
            its last 100 events, read with `GET …/jobs/{id}/history`. Applies to events after it is set; each event costs
            one write to Redis.
        max_in_flight (int | None | Unset): Jobs of the queue processing at once at most, fleet-wide.
        max_pending (int | None | Unset): Jobs waiting to be handed out (pending, scheduled, or waiting for their
            dependencies) at most: an enqueue whose new jobs would go past it answers 429 `queue_full` and changes nothing.
            A queue split over K shards bounds each shard at ⌈max_pending / K⌉.
        max_pending_bytes (int | None | Unset): Bytes of waiting jobs at most, counted as stored: each job's task, args
            as sent and trace context (pending, scheduled, or waiting for their dependencies). An enqueue whose new jobs
            would go past it answers 429 `queue_full` and changes nothing. Counts the jobs that enter waiting once it is set
            (enqueued, or back from a lease's end or the DLQ); a replace by dedup key is admitted whatever it. A queue split
            over K shards bounds each shard at ⌈max_pending_bytes / K⌉.
        max_wait_ms (int | None | Unset): Priority aging: a job without a group that waits this long (ms) in its
            priority is claimed as if it had the next more urgent one, at its front (after the jobs that aged into it
            before), and so on: a job of priority p is claimed as priority 0 after p × max_wait_ms at most. Applies to jobs
            that enter pending once it is set.
        paused (bool | None | Unset): While true, claims hand out nothing; enqueue, ack, extend, nack and the sweeper go
            on.
        rate_limit (None | RateLimitPatch | Unset):
        retain_ms (int | None | Unset): How long jobs enqueued without a `retain_ms` of their own are kept once acked
            (ms; 0: deleted on ack).
        shards (int | None | Unset): The number of Redis hash slots the queue's jobs are spread over. Changes only while
            the queue holds no job in any state, else 409 and nothing changes.
    """

    group_max_in_flight: int | None | Unset = UNSET
    group_rate_limit: None | RateLimitPatch | Unset = UNSET
    group_weights: None | SettingsPatchGroupWeightsType0 | Unset = UNSET
    history_ms: int | None | Unset = UNSET
    max_in_flight: int | None | Unset = UNSET
    max_pending: int | None | Unset = UNSET
    max_pending_bytes: int | None | Unset = UNSET
    max_wait_ms: int | None | Unset = UNSET
    paused: bool | None | Unset = UNSET
    rate_limit: None | RateLimitPatch | Unset = UNSET
    retain_ms: int | None | Unset = UNSET
    shards: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.rate_limit_patch import RateLimitPatch  # noqa: PLC0415
        from ..models.settings_patch_group_weights_type_0 import SettingsPatchGroupWeightsType0  # noqa: PLC0415

        group_max_in_flight: int | None | Unset
        if isinstance(self.group_max_in_flight, Unset):
            group_max_in_flight = UNSET
        else:
            group_max_in_flight = self.group_max_in_flight

        group_rate_limit: dict[str, Any] | None | Unset
        if isinstance(self.group_rate_limit, Unset):
            group_rate_limit = UNSET
        elif isinstance(self.group_rate_limit, RateLimitPatch):
            group_rate_limit = self.group_rate_limit.to_dict()
        else:
            group_rate_limit = self.group_rate_limit

        group_weights: dict[str, Any] | None | Unset
        if isinstance(self.group_weights, Unset):
            group_weights = UNSET
        elif isinstance(self.group_weights, SettingsPatchGroupWeightsType0):
            group_weights = self.group_weights.to_dict()
        else:
            group_weights = self.group_weights

        history_ms: int | None | Unset
        if isinstance(self.history_ms, Unset):
            history_ms = UNSET
        else:
            history_ms = self.history_ms

        max_in_flight: int | None | Unset
        if isinstance(self.max_in_flight, Unset):
            max_in_flight = UNSET
        else:
            max_in_flight = self.max_in_flight

        max_pending: int | None | Unset
        if isinstance(self.max_pending, Unset):
            max_pending = UNSET
        else:
            max_pending = self.max_pending

        max_pending_bytes: int | None | Unset
        if isinstance(self.max_pending_bytes, Unset):
            max_pending_bytes = UNSET
        else:
            max_pending_bytes = self.max_pending_bytes

        max_wait_ms: int | None | Unset
        if isinstance(self.max_wait_ms, Unset):
            max_wait_ms = UNSET
        else:
            max_wait_ms = self.max_wait_ms

        paused: bool | None | Unset
        if isinstance(self.paused, Unset):
            paused = UNSET
        else:
            paused = self.paused

        rate_limit: dict[str, Any] | None | Unset
        if isinstance(self.rate_limit, Unset):
            rate_limit = UNSET
        elif isinstance(self.rate_limit, RateLimitPatch):
            rate_limit = self.rate_limit.to_dict()
        else:
            rate_limit = self.rate_limit

        retain_ms: int | None | Unset
        if isinstance(self.retain_ms, Unset):
            retain_ms = UNSET
        else:
            retain_ms = self.retain_ms

        shards: int | None | Unset
        if isinstance(self.shards, Unset):
            shards = UNSET
        else:
            shards = self.shards

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if group_max_in_flight is not UNSET:
            field_dict["group_max_in_flight"] = group_max_in_flight
        if group_rate_limit is not UNSET:
            field_dict["group_rate_limit"] = group_rate_limit
        if group_weights is not UNSET:
            field_dict["group_weights"] = group_weights
        if history_ms is not UNSET:
            field_dict["history_ms"] = history_ms
        if max_in_flight is not UNSET:
            field_dict["max_in_flight"] = max_in_flight
        if max_pending is not UNSET:
            field_dict["max_pending"] = max_pending
        if max_pending_bytes is not UNSET:
            field_dict["max_pending_bytes"] = max_pending_bytes
        if max_wait_ms is not UNSET:
            field_dict["max_wait_ms"] = max_wait_ms
        if paused is not UNSET:
            field_dict["paused"] = paused
        if rate_limit is not UNSET:
            field_dict["rate_limit"] = rate_limit
        if retain_ms is not UNSET:
            field_dict["retain_ms"] = retain_ms
        if shards is not UNSET:
            field_dict["shards"] = shards

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.rate_limit_patch import RateLimitPatch  # noqa: PLC0415
        from ..models.settings_patch_group_weights_type_0 import SettingsPatchGroupWeightsType0  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_group_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        group_max_in_flight = _parse_group_max_in_flight(d.pop("group_max_in_flight", UNSET))

        def _parse_group_rate_limit(data: object) -> None | RateLimitPatch | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                group_rate_limit_type_0 = RateLimitPatch.from_dict(data)

                return group_rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimitPatch | Unset, data)

        group_rate_limit = _parse_group_rate_limit(d.pop("group_rate_limit", UNSET))

        def _parse_group_weights(data: object) -> None | SettingsPatchGroupWeightsType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                group_weights_type_0 = SettingsPatchGroupWeightsType0.from_dict(data)

                return group_weights_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SettingsPatchGroupWeightsType0 | Unset, data)

        group_weights = _parse_group_weights(d.pop("group_weights", UNSET))

        def _parse_history_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        history_ms = _parse_history_ms(d.pop("history_ms", UNSET))

        def _parse_max_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_in_flight = _parse_max_in_flight(d.pop("max_in_flight", UNSET))

        def _parse_max_pending(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_pending = _parse_max_pending(d.pop("max_pending", UNSET))

        def _parse_max_pending_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_pending_bytes = _parse_max_pending_bytes(d.pop("max_pending_bytes", UNSET))

        def _parse_max_wait_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_wait_ms = _parse_max_wait_ms(d.pop("max_wait_ms", UNSET))

        def _parse_paused(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        paused = _parse_paused(d.pop("paused", UNSET))

        def _parse_rate_limit(data: object) -> None | RateLimitPatch | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                rate_limit_type_0 = RateLimitPatch.from_dict(data)

                return rate_limit_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RateLimitPatch | Unset, data)

        rate_limit = _parse_rate_limit(d.pop("rate_limit", UNSET))

        def _parse_retain_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retain_ms = _parse_retain_ms(d.pop("retain_ms", UNSET))

        def _parse_shards(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        shards = _parse_shards(d.pop("shards", UNSET))

        settings_patch = cls(
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

        return settings_patch
