from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.effect import Effect
from ..models.problem_code import ProblemCode
from ..types import UNSET, Unset

T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """An RFC 9457 problem details object.

    Example:
        {'code': 'lease_lost', 'detail': "the lease token is not the job's current lease; the job was taken back or
            claimed again", 'status': 409, 'title': 'Conflict', 'type': 'urn:prioq:problem:lease_lost'}

    Attributes:
        code (ProblemCode): The `code` member of every problem.
        detail (str):
        status (int):
        title (str):
        type_ (str): Identifies the kind of problem; one per `code`.
        effect (Effect | None | Unset):
        field (None | str | Unset): The request field that failed validation, for `validation_failed`.
    """

    code: ProblemCode
    detail: str
    status: int
    title: str
    type_: str
    effect: Effect | None | Unset = UNSET
    field: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        code = self.code.value

        detail = self.detail

        status = self.status

        title = self.title

        type_ = self.type_

        effect: None | str | Unset
        if isinstance(self.effect, Unset):
            effect = UNSET
        elif isinstance(self.effect, Effect):
            effect = self.effect.value
        else:
            effect = self.effect

        field: None | str | Unset
        if isinstance(self.field, Unset):
            field = UNSET
        else:
            field = self.field

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "detail": detail,
                "status": status,
                "title": title,
                "type": type_,
            }
        )
        if effect is not UNSET:
            field_dict["effect"] = effect
        if field is not UNSET:
            field_dict["field"] = field

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        code = ProblemCode(d.pop("code"))

        detail = d.pop("detail")

        status = d.pop("status")

        title = d.pop("title")

        type_ = d.pop("type")

        def _parse_effect(data: object) -> Effect | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                effect_type_0 = Effect(data)

                return effect_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Effect | None | Unset, data)

        effect = _parse_effect(d.pop("effect", UNSET))

        def _parse_field(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        field = _parse_field(d.pop("field", UNSET))

        problem = cls(
            code=code,
            detail=detail,
            status=status,
            title=title,
            type_=type_,
            effect=effect,
            field=field,
        )

        problem.additional_properties = d
        return problem

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
