"""attrs validators and small array helpers shared by the throughput value objects.

Each validator raises :class:`~probewise.errors.InvalidInputError` naming the field.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import numpy.typing as npt

from probewise.errors import InvalidInputError

__all__ = [
    "finite",
    "finite_non_negative",
    "non_negative",
    "optional_positive",
    "optional_share",
    "positive",
    "read_only",
    "share",
]


def non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise InvalidInputError(f"{attribute.name} must be >= 0, got {value}")


def positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise InvalidInputError(f"{attribute.name} must be >= 1, got {value}")


def optional_positive(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value < 1:
        raise InvalidInputError(f"{attribute.name} must be >= 1 or None, got {value}")


def finite(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not math.isfinite(value):
        raise InvalidInputError(f"{attribute.name} must be finite, got {value}")


def finite_non_negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise InvalidInputError(f"{attribute.name} must be finite and >= 0, got {value}")


def share(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{attribute.name} must be in [0, 1], got {value}")


def optional_share(
    _instance: object, attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{attribute.name} must be in [0, 1] or None, got {value}")


def read_only(array: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``array`` itself, marked read-only."""
    array.flags.writeable = False
    return array
