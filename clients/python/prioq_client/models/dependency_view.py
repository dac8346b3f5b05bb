from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.dependency_state import DependencyState
from ..types import UNSET, Unset

T = TypeVar("T", bound="DependencyView")


@_attrs_define
class DependencyView:
    """One dependency of a job.

    Attributes:
        ref (str): `queue/id`.
        result (Any | Unset): What its worker sent with its ack (completed ones); null for none.
        state (DependencyState | None | Unset):
    """

    ref: str
    result: Any | Unset = UNSET
    state: DependencyState | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ref = self.ref

        result = self.result

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        elif isinstance(self.state, DependencyState):
            state = self.state.value
        else:
            state = self.state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ref": ref,
            }
        )
        if result is not UNSET:
            field_dict["result"] = result
        if state is not UNSET:
            field_dict["state"] = state

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ref = d.pop("ref")

        result = d.pop("result", UNSET)

        def _parse_state(data: object) -> DependencyState | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                state_type_0 = DependencyState(data)

                return state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DependencyState | None | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        dependency_view = cls(
            ref=ref,
            result=result,
            state=state,
        )

        dependency_view.additional_properties = d
        return dependency_view

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
