"""ArmTally: the counts of one arm, a commutative monoid; Proportion with Wilson intervals."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Literal, assert_never, final

import attrs

from probewise.errors import InvalidInputError
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Outcome, Refused

__all__ = ["ArmTally", "Proportion"]

_count = [attrs.validators.instance_of(int), attrs.validators.ge(0)]


def _not_bool(_instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be an int, not a bool")


def _unit_or_nan(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if not isinstance(value, float | int) or not (math.isnan(value) or 0.0 <= value <= 1.0):
        raise ValueError(f"{attribute.name} must lie in [0, 1], got {value!r}")


@final
@attrs.frozen(kw_only=True)
class Proportion:
    """``successes`` out of ``trials``, with a Wilson score interval [low, high].

    With zero trials the estimate is NaN and the interval is [0, 1].
    """

    successes: int = attrs.field(validator=[*_count, _not_bool])
    trials: int = attrs.field(validator=[*_count, _not_bool])
    estimate: float = attrs.field(validator=_unit_or_nan)
    low: float = attrs.field(validator=_unit_or_nan)
    high: float = attrs.field(validator=_unit_or_nan)

    def __attrs_post_init__(self) -> None:
        if self.successes > self.trials:
            raise ValueError(f"successes ({self.successes}) exceed trials ({self.trials})")
        if math.isnan(self.estimate) != (self.trials == 0):
            raise ValueError("estimate is NaN exactly when there are no trials")
        if not self.low <= self.high:
            raise ValueError(f"low ({self.low}) exceeds high ({self.high})")

    @classmethod
    def wilson(cls, successes: int, trials: int, *, confidence: float = 0.95) -> Proportion:
        """The Wilson score interval (no continuity correction) at ``confidence``."""
        if not 0.0 < confidence < 1.0:
            raise InvalidInputError(f"confidence must lie in (0, 1), got {confidence!r}")
        if trials == 0:
            return cls(successes=successes, trials=0, estimate=math.nan, low=0.0, high=1.0)
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        p = successes / trials
        z2n = z * z / trials
        centre = (p + z2n / 2.0) / (1.0 + z2n)
        half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / trials + z2n / (4.0 * trials))
        low = 0.0 if successes == 0 else max(0.0, centre - half)
        high = 1.0 if successes == trials else min(1.0, centre + half)
        return cls(successes=successes, trials=trials, estimate=p, low=low, high=high)

    def __str__(self) -> str:
        if self.trials == 0:
            return "n/a (0 trials)"
        return (
            f"{self.estimate:.1%} [{self.low:.1%}, {self.high:.1%}] "
            f"({self.successes}/{self.trials})"
        )

    def to_dict(self) -> dict[str, float | int | None]:
        """Plain JSON-ready values (NaN becomes ``None``)."""
        return {
            "successes": self.successes,
            "trials": self.trials,
            "estimate": None if math.isnan(self.estimate) else self.estimate,
            "low": self.low,
            "high": self.high,
        }


Bucket = type[Complied] | type[Deflected] | type[Refused] | type[Empty] | type[Error]

_FIELDS = ("complied", "deflected", "refused", "empty", "error", "truncated")


@final
@attrs.frozen(kw_only=True)
class ArmTally:
    """Counts of one arm's outcomes. ``a + b`` merges (``ArmTally()`` is the identity).

    ``truncated`` counts outcomes that finished at the token limit, whatever their
    bucket (so it is at most ``n - error``).
    """

    complied: int = attrs.field(default=0, validator=[*_count, _not_bool])
    deflected: int = attrs.field(default=0, validator=[*_count, _not_bool])
    refused: int = attrs.field(default=0, validator=[*_count, _not_bool])
    empty: int = attrs.field(default=0, validator=[*_count, _not_bool])
    error: int = attrs.field(default=0, validator=[*_count, _not_bool])
    truncated: int = attrs.field(default=0, validator=[*_count, _not_bool])

    def __attrs_post_init__(self) -> None:
        if self.truncated > self.n - self.error:
            raise ValueError(
                f"truncated ({self.truncated}) exceeds the classified outcomes "
                f"({self.n - self.error}): errors carry no truncation flag"
            )

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> ArmTally:
        """Count outcomes (consumed once; anything that is not an Outcome raises TypeError)."""
        counts = dict.fromkeys(_FIELDS, 0)
        for outcome in outcomes:
            match outcome:
                case Complied(truncated=t):
                    counts["complied"] += 1
                case Deflected(truncated=t):
                    counts["deflected"] += 1
                case Refused(truncated=t):
                    counts["refused"] += 1
                case Empty(truncated=t):
                    counts["empty"] += 1
                case Error():
                    counts["error"] += 1
                    t = False
                case _:
                    raise TypeError(  # pyright: ignore[reportUnreachable]
                        f"ArmTally.of takes outcomes, got {type(outcome).__name__}"
                    )
            if t:
                counts["truncated"] += 1
        return cls(**counts)

    def __add__(self, other: ArmTally) -> ArmTally:
        if not isinstance(other, ArmTally):  # pyright: ignore[reportUnnecessaryIsInstance]
            return NotImplemented
        return ArmTally(**{f: getattr(self, f) + getattr(other, f) for f in _FIELDS})

    @property
    def n(self) -> int:
        """Every outcome counted."""
        return self.complied + self.deflected + self.refused + self.empty + self.error

    @property
    def answered(self) -> int:
        """Complied + deflected + refused: the outcomes that were classified as answers."""
        return self.complied + self.deflected + self.refused

    def count(self, bucket: Bucket) -> int:
        """The count of one bucket, given as its outcome class."""
        if bucket is Complied:
            return self.complied
        if bucket is Deflected:
            return self.deflected
        if bucket is Refused:
            return self.refused
        if bucket is Empty:
            return self.empty
        if bucket is Error:
            return self.error
        raise TypeError(f"not an outcome class: {bucket!r}")

    def rate(
        self,
        bucket: Bucket,
        *,
        over: Literal["answered", "all"] = "answered",
        confidence: float = 0.95,
    ) -> Proportion:
        """The share of ``bucket`` with its Wilson interval.

        ``over="answered"`` divides by complied + deflected + refused (Empty and Error
        are not answers, so asking for their rate over answered raises
        :class:`~probewise.InvalidInputError`); ``over="all"`` divides by ``n``.
        """
        if over == "answered":
            if bucket is Empty or bucket is Error:
                raise InvalidInputError(
                    f"{bucket.__name__} is not an answer: use over='all' for its rate"
                )
            trials = self.answered
        elif over == "all":
            trials = self.n
        else:
            assert_never(over)
        return Proportion.wilson(self.count(bucket), trials, confidence=confidence)

    @property
    def truncated_share(self) -> float:
        """Truncated outcomes over all outcomes (NaN for an empty tally)."""
        return self.truncated / self.n if self.n else math.nan

    def to_dict(self) -> dict[str, int]:
        """The six counts, JSON-ready."""
        return {f: int(getattr(self, f)) for f in _FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ArmTally:
        """Inverse of :meth:`to_dict`; unknown keys or non-int counts raise."""
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise InvalidInputError(f"unknown ArmTally fields {unknown}; expected {list(_FIELDS)}")
        values: dict[str, int] = {}
        for key, value in data.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidInputError(
                    f"ArmTally.{key} must be an int, got {type(value).__name__}"
                )
            values[key] = value
        return cls(**values)
