"""The one set of attrs validators and converters every value object uses.

Each raises a :class:`~probewise.errors.ProbewiseError` subclass naming the field:
:class:`~probewise.errors.ArgumentTypeError` (a :class:`TypeError`) for a value of the
wrong type and :class:`~probewise.errors.InvalidInputError` (a :class:`ValueError`)
for a value outside the accepted range. A wrong-typed value is reported by its type
only, never echoed (it might be completion text); numbers outside a range are shown.

A wrong type is always an :class:`ArgumentTypeError`. The validators marked "ValueError
for any bad value" serve fields that have always refused any bad value with
:class:`ValueError`: their wrong type is an
:class:`~probewise.errors.ArgumentTypeValueError`, an :class:`ArgumentTypeError` that is
an :class:`InvalidInputError` too, so code that catches :class:`ValueError` around them
keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any, TypeVar, cast

import attrs

from probewise.errors import (
    ArgumentTypeError,
    ArgumentTypeValueError,
    InvalidInputError,
    RubricError,
)

__all__ = [
    "MAX_LENGTH",
    "checked_type",
    "count",
    "duration",
    "finite",
    "finite_non_negative",
    "int_at_least",
    "length_int",
    "non_blank_str",
    "non_empty_str",
    "non_negative",
    "non_negative_int",
    "optional",
    "optional_duration",
    "positive",
    "rubric_timeout",
    "share",
    "shown_int",
    "strict_int",
    "true_or_false",
    "two_sided_z",
    "unit_or_nan",
]

_T = TypeVar("_T")

Validator = Callable[[object, "attrs.Attribute[_T]", _T], None]
"""What attrs calls a validator with: the instance, the field and the value."""


def _qualified(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- types


def checked_type(kind: type[_T]) -> Validator[_T]:
    """Like ``attrs.validators.instance_of``, but raises
    :class:`~probewise.errors.ArgumentTypeError` and reports the wrong value's type only."""

    def check(instance: object, attribute: attrs.Attribute[_T], value: _T) -> None:
        if not isinstance(cast("object", value), kind):
            raise ArgumentTypeError(
                f"{_qualified(instance, attribute)} must be a {kind.__name__}, "
                f"got {type(value).__name__}"
            )

    return check


def optional(inner: Validator[_T]) -> Validator[_T | None]:
    """``inner``, or None: the one way a field says it may be absent.

    A refusal keeps ``inner``'s class and message, with "or None" said before its
    ", got ..." (``KernelRow.calls must be a non-negative int or None, got -1``).
    """

    def check(instance: object, attribute: attrs.Attribute[_T | None], value: _T | None) -> None:
        if value is None:
            return
        try:
            inner(instance, cast("attrs.Attribute[_T]", attribute), value)
        except (ArgumentTypeError, InvalidInputError) as refused:
            head, got, tail = str(refused).partition(", got ")
            raise type(refused)(f"{head} or None{got}{tail}") from None

    return check


# --------------------------------------------------------------------------- counts


def count(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    """An int >= 0 (a bool is refused as a type)."""
    name = _qualified(instance, attribute)
    if not _is_int(value):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}")
    if cast("int", value) < 0:
        raise InvalidInputError(f"{name} must be >= 0, got {value}")


def non_negative_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An int >= 0; ValueError for any bad value (the field's builtin base)."""
    if not _is_int(value):
        raise ArgumentTypeValueError(
            f"{_qualified(instance, attribute)} must be a non-negative int, got {type(value).__name__}"
        )
    if cast("int", value) < 0:
        raise InvalidInputError(
            f"{_qualified(instance, attribute)} must be a non-negative int, got {value}"
        )


# --------------------------------------------------------------------------- numbers


def _below(name: str, value: object, bound: float) -> bool:
    """``value < bound``; a value that does not compare is refused by type."""
    try:
        return bool(cast("float", value) < bound)
    except TypeError:
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}") from None


def _is_finite(name: str, value: object) -> bool:
    try:
        return math.isfinite(cast("float", value))
    except TypeError:
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}") from None


def non_negative(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if _below(_qualified(instance, attribute), value, 0):
        raise InvalidInputError(f"{_qualified(instance, attribute)} must be >= 0, got {value}")


def positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if _below(_qualified(instance, attribute), value, 1):
        raise InvalidInputError(f"{_qualified(instance, attribute)} must be >= 1, got {value}")


def finite(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not _is_finite(_qualified(instance, attribute), value):
        raise InvalidInputError(f"{_qualified(instance, attribute)} must be finite, got {value}")


def finite_non_negative(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (_is_finite(_qualified(instance, attribute), value) and value >= 0.0):
        raise InvalidInputError(
            f"{_qualified(instance, attribute)} must be finite and >= 0, got {value}"
        )


def _in_unit(name: str, value: object) -> bool:
    """``0 <= value <= 1`` (NaN is outside); a value that does not compare is refused by type."""
    try:
        return bool(0.0 <= cast("float", value) <= 1.0)
    except TypeError:
        raise ArgumentTypeError(f"{name} must be a number, got {type(value).__name__}") from None


def share(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not _in_unit(_qualified(instance, attribute), value):
        raise InvalidInputError(f"{_qualified(instance, attribute)} must be in [0, 1], got {value}")


def unit_or_nan(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    """A float (or int) in [0, 1], or NaN."""
    name = _qualified(instance, attribute)
    if isinstance(value, bool) or not isinstance(value, float | int):
        raise ArgumentTypeError(f"{name} must be a float, got {type(value).__name__}")
    if not (math.isnan(value) or 0.0 <= value <= 1.0):
        raise InvalidInputError(f"{name} must lie in [0, 1], got {value!r}")


# --------------------------------------------------------------------------- strings


def non_empty_str(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    """A str with at least one character; ValueError for any bad value."""
    if not isinstance(value, str):
        raise ArgumentTypeValueError(
            f"{_qualified(instance, attribute)} must be a non-empty str, got {type(value).__name__}"
        )
    if not value:
        raise InvalidInputError(
            f"{_qualified(instance, attribute)} must be a non-empty str, got ''"
        )


def non_blank_str(instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    """A str with a character that is not whitespace; ValueError for any bad value."""
    non_empty_str(instance, attribute, value)
    if not cast("str", value).strip():
        raise InvalidInputError(f"{_qualified(instance, attribute)} must not be only whitespace")


# --------------------------------------------------------------------------- durations


def duration(value: object) -> float:
    """attrs converter: a finite, non-negative number of µs, rounded to the 1 ns grid."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"a duration must be a number of microseconds, got {type(value).__name__}"
        )
    if not math.isfinite(value * 1000) or value < 0:
        # value * 1000 (the ns grid) overflows past ~1.8e305 µs: refused, not an OverflowError.
        raise InvalidInputError(f"a duration must be finite and >= 0, got {value!r}")
    return round(value * 1000) / 1000


def optional_duration(value: object) -> float | None:
    """:func:`duration`, or None. (A converter, so not :func:`optional`: attrs types
    its own ``converters.optional`` as taking and giving ``Any``, which would reach
    the fields' ``__init__``.)"""
    return None if value is None else duration(value)


# --------------------------------------------------------------------------- throughput
# The throughput half's own validators, once private to one module
# each (``sdpa._strict_int``, ``masks._bool``, ``scaling._positive_int``). Each keeps
# the exception class and the message it raised there: they name the field alone,
# not ``Class.field``, and raise InvalidInputError for any bad value.

MAX_LENGTH = 1 << 40
"""The longest sequence length probewise accepts: 2**40 (1,099,511,627,776) tokens."""


def shown_int(number: int) -> str:
    """``number`` for a message: its digits when short, its size when not.

    Python refuses to print an int of more than 4,300 digits, and nobody reads one.
    """
    if abs(number) < 10**30:
        return str(number)
    sign = "-" if number < 0 else ""
    return f"{sign}a {number.bit_length()}-bit number"


def strict_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """An int (a bool is refused); the range is left to another validator. ValueError
    for any bad value."""
    if not _is_int(value):
        raise ArgumentTypeValueError(f"{attribute.name} must be an int, got {type(value).__name__}")


def true_or_false(_instance: object, attribute: attrs.Attribute[bool], value: object) -> None:
    """A bool; ValueError for any bad value."""
    if not isinstance(value, bool):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be True or False, got {type(value).__name__}"
        )


def length_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    """An int or a numpy integer (not a bool) in ``[1, MAX_LENGTH]``: a sequence length
    or a batch size; ValueError for any bad value."""
    import numpy as np  # loaded already wherever a length is checked; not at import

    if isinstance(value, bool) or not isinstance(value, int | np.integer):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeValueError(
            f"{attribute.name} must be an int, got a {type(value).__name__}"
        )
    if value < 1:
        raise InvalidInputError(f"{attribute.name} must be >= 1, got {shown_int(int(value))}")
    if value > MAX_LENGTH:
        raise InvalidInputError(
            f"{attribute.name} must be at most 2**40, got {shown_int(int(value))}"
        )


# --------------------------------------------------------------------------- responses
# The response half's validators, once private to their modules.


def rubric_timeout(_instance: object, _attribute: attrs.Attribute[float], value: object) -> None:
    """Rubric.timeout: a positive number of seconds (TypeError for a non-number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(f"Rubric.timeout must be a number, got {type(value).__name__}")
    if not value > 0:
        raise RubricError(f"Rubric.timeout must be a positive number of seconds, got {value!r}")


def int_at_least(name: str, value: object, least: int) -> None:
    """An int (not a bool) >= ``least``, for the argument ``name``; ValueError for any
    bad value."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeValueError(
            f"{name} must be an int >= {least}, got {type(value).__name__}"
        )
    if value < least:
        raise InvalidInputError(f"{name} must be an int >= {least}, got {value}")


def two_sided_z(confidence: float, *, name: str) -> float:
    """The normal quantile of a two-sided interval at ``confidence``.

    Refuses (:class:`~probewise.errors.InvalidInputError`) a confidence outside (0, 1),
    and one so close to 1 that ``0.5 + confidence / 2`` rounds to 1 (about
    ``1 - 1e-16``), whose quantile is infinite: checked where it is used, since a
    field holding it may be fine until then.
    """
    tail = 0.5 + confidence / 2.0
    if not 0.0 < confidence < 1.0 or not tail < 1.0:
        raise InvalidInputError(
            f"{name} must lie in (0, 1), short of 1 by more than about 1e-16, got {confidence!r}"
        )
    return NormalDist().inv_cdf(tail)
