"""Converters and validators of the mask probe's scenario fields that name the field
in their one-line errors (the scenario's own checks, apart from
:mod:`probewise.throughput.attention.masks`, which composes the probe)."""

from __future__ import annotations

import enum
import operator
from collections.abc import Iterable
from typing import SupportsIndex, TypeVar, cast

import attrs

from probewise.errors import ArgumentTypeValueError, InvalidInputError

_E = TypeVar("_E", bound=enum.Enum)


def as_int(value: object, name: str) -> int:
    """``value`` as an ``int``, refusing what is not an integer (floats, NaN, strings,
    bools) with the field's name: ``MaskScenario(seq_len=nan)`` must not pass."""
    if isinstance(value, bool):
        raise ArgumentTypeValueError(f"{name} must be an integer, got a bool ({value})")
    try:
        return operator.index(cast("SupportsIndex", value))
    except TypeError:
        raise ArgumentTypeValueError(
            f"{name} must be an integer, got {type(value).__name__}"
        ) from None


def as_ints(values: object, name: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ArgumentTypeValueError(
            f"{name} must be a sequence of integers, got {type(values).__name__}"
        )
    return tuple(as_int(v, f"every entry of {name}") for v in cast("Iterable[object]", values))


def as_enum(value: object, kind: type[_E], name: str) -> _E:
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in kind)
        raise InvalidInputError(f"{name} must be one of {choices}, got {value!r}") from None


def optional_bool(
    _instance: object, attribute: attrs.Attribute[bool | None], value: object
) -> None:
    if value is not None and not isinstance(value, bool):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be True, False or None, got {type(value).__name__}"
        )
