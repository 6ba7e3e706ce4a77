"""Counting outcomes: Proportion with Wilson intervals, ArmTally (the counts of one arm, a
commutative monoid), OutcomeBucket, and McNemar (the exact paired test of two arms)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from typing import Literal, assert_never, cast, final

import attrs

from probewise import _json
from probewise._validation import count as _count
from probewise._validation import two_sided_z
from probewise._validation import unit_or_nan as _unit_or_nan
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Outcome, Refused

__all__ = ["ArmTally", "McNemar", "OutcomeBucket", "Proportion"]


@_json.shaped(_json.Shape(nan_as_none={"estimate"}))
@final
@attrs.frozen(kw_only=True)
class Proportion:
    """``successes`` out of ``trials``, with a Wilson score interval [low, high].

    With zero trials the estimate is NaN and the interval is [0, 1].
    """

    successes: int = attrs.field(validator=_count)
    trials: int = attrs.field(validator=_count)
    estimate: float = attrs.field(validator=_unit_or_nan)
    low: float = attrs.field(validator=_unit_or_nan)
    high: float = attrs.field(validator=_unit_or_nan)

    def __attrs_post_init__(self) -> None:
        if self.successes > self.trials:
            raise InvalidInputError(
                f"Proportion.successes ({self.successes}) exceeds trials ({self.trials})"
            )
        if math.isnan(self.estimate) != (self.trials == 0):
            raise InvalidInputError("Proportion.estimate is NaN exactly when there are no trials")
        if not self.low <= self.high:
            raise InvalidInputError(f"Proportion.low ({self.low}) exceeds high ({self.high})")

    @classmethod
    def wilson(cls, successes: int, trials: int, *, confidence: float = 0.95) -> Proportion:
        """The Wilson score interval (no continuity correction) at ``confidence``.

        Raises :class:`~probewise.ArgumentTypeError` for counts that are not ints and
        :class:`~probewise.InvalidInputError` for negative counts, ``successes``
        above ``trials``, or a ``confidence`` outside (0, 1), naming the argument.
        """
        for name, value in (("successes", successes), ("trials", trials)):
            if isinstance(value, bool) or not isinstance(cast("object", value), int):
                raise ArgumentTypeError(
                    f"Proportion.wilson: {name} must be an int, got {type(value).__name__}"
                )
            if value < 0:
                raise InvalidInputError(f"Proportion.wilson: {name} must be >= 0, got {value}")
        if successes > trials:
            raise InvalidInputError(
                f"Proportion.wilson: successes ({successes}) exceeds trials ({trials})"
            )
        bad = isinstance(confidence, bool) or not isinstance(
            cast("object", confidence), float | int
        )
        if bad:
            raise ArgumentTypeError(
                f"Proportion.wilson: confidence must be a float, got {type(confidence).__name__}"
            )
        z = two_sided_z(confidence, name="Proportion.wilson: confidence")
        if trials == 0:
            return cls(successes=successes, trials=0, estimate=math.nan, low=0.0, high=1.0)
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
        return cast("dict[str, float | int | None]", _json.to_dict(self))


Bucket = type[Complied] | type[Deflected] | type[Refused] | type[Empty] | type[Error]

_FIELDS = (
    "complied",
    "deflected",
    "refused",
    "empty",
    "error",
    "truncated",
    "decided",
    "tokens",
    "counted",
)


@final
@attrs.frozen(kw_only=True)
class ArmTally:
    """Counts of one arm's outcomes. ``a + b`` merges (``ArmTally()`` is the identity).

    ``truncated`` counts outcomes that finished at the token limit, whatever their
    bucket (so it is at most ``n - error``); ``decided`` those whose generation
    probewise stopped once the outcome was decided (never counted as truncated).
    ``tokens`` is the number of tokens generated over the ``counted`` prompts whose
    generator counted them (:attr:`tokens_per_prompt`); :func:`~probewise.run_arm`
    fills both in, :meth:`of` leaves them 0.
    """

    complied: int = attrs.field(default=0, validator=_count)
    deflected: int = attrs.field(default=0, validator=_count)
    refused: int = attrs.field(default=0, validator=_count)
    empty: int = attrs.field(default=0, validator=_count)
    error: int = attrs.field(default=0, validator=_count)
    truncated: int = attrs.field(default=0, validator=_count)
    decided: int = attrs.field(default=0, validator=_count)
    tokens: int = attrs.field(default=0, validator=_count)
    counted: int = attrs.field(default=0, validator=_count)

    def __attrs_post_init__(self) -> None:
        if self.decided > self.n - self.error:
            raise InvalidInputError(
                f"ArmTally.decided ({self.decided}) exceeds the classified outcomes "
                f"({self.n - self.error}): errors carry no decided flag"
            )
        if self.counted > self.n:
            raise InvalidInputError(
                f"ArmTally.counted ({self.counted}) exceeds the outcomes ({self.n})"
            )
        if self.truncated > self.n - self.error:
            raise InvalidInputError(
                f"ArmTally.truncated ({self.truncated}) exceeds the classified outcomes "
                f"({self.n - self.error}): errors carry no truncation flag"
            )

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> ArmTally:
        """Count outcomes (consumed once; anything that is not an Outcome raises
        :class:`~probewise.ArgumentTypeError`)."""
        counts = dict.fromkeys(_FIELDS, 0)
        for outcome in cast("Iterable[object]", outcomes):
            match outcome:
                case Complied(truncated=t, decided=d):
                    counts["complied"] += 1
                case Deflected(truncated=t, decided=d):
                    counts["deflected"] += 1
                case Refused(truncated=t, decided=d):
                    counts["refused"] += 1
                case Empty(truncated=t, decided=d):
                    counts["empty"] += 1
                case Error():
                    counts["error"] += 1
                    t = d = False
                case _:
                    kind = type(outcome).__name__
                    # Neither the item (a str, perhaps the text) nor the iterable is
                    # left in this frame's locals for a traceback with locals to print.
                    del outcome, outcomes
                    raise ArgumentTypeError(f"ArmTally.of takes outcomes, got {kind}")
            if t:
                counts["truncated"] += 1
            if d:
                counts["decided"] += 1
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
        pairs = (
            (Complied, self.complied),
            (Deflected, self.deflected),
            (Refused, self.refused),
            (Empty, self.empty),
            (Error, self.error),
        )
        for kind, count in pairs:
            if bucket is kind:
                return count
        given = cast("object", bucket)
        shown = given.__name__ if isinstance(given, type) else f"a {type(given).__name__}"
        raise ArgumentTypeError(f"ArmTally.count takes an outcome class, got {shown}")

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
        if cast("object", over) not in ("answered", "all"):
            raise InvalidInputError("ArmTally.rate: over must be 'answered' or 'all'")
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

    @property
    def tokens_per_prompt(self) -> float:
        """Tokens generated per prompt, over the prompts whose count is known (NaN
        when none is)."""
        return self.tokens / self.counted if self.counted else math.nan

    def to_dict(self) -> dict[str, int]:
        """The counts, JSON-ready."""
        return cast("dict[str, int]", _json.to_dict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ArmTally:
        """Inverse of :meth:`to_dict`; unknown keys or non-int counts raise."""
        return _json.structure(data, cls)


@enum.unique
class OutcomeBucket(enum.Enum):
    """The five outcome buckets, as a closed set (for per-bucket figures)."""

    COMPLIED = "complied"
    DEFLECTED = "deflected"
    REFUSED = "refused"
    EMPTY = "empty"
    ERROR = "error"

    @classmethod
    def of(cls, outcome: Outcome) -> OutcomeBucket:
        """The bucket an outcome falls in."""
        match outcome:
            case Complied():
                return cls.COMPLIED
            case Deflected():
                return cls.DEFLECTED
            case Refused():
                return cls.REFUSED
            case Empty():
                return cls.EMPTY
            case Error():
                return cls.ERROR


def _p_value(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, float | int):
        raise ArgumentTypeError(
            f"McNemar.{attribute.name} must be a float, got {type(value).__name__}"
        )
    if not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"McNemar.{attribute.name} must be in [0, 1], got {value}")


@final
@attrs.frozen(kw_only=True)
class McNemar:
    """Exact McNemar test for one bucket on the discordant pairs.

    ``only_a`` counts prompts in the bucket under arm A but not under B, ``only_b``
    the reverse; under no difference each discordant pair is a fair coin, so
    ``p_value`` is the two-sided exact binomial test of ``only_a`` out of
    ``only_a + only_b`` at 1/2 (1.0 when there are no discordant pairs).
    """

    bucket: OutcomeBucket
    only_a: int
    only_b: int
    p_value: float = attrs.field(validator=_p_value)

    @property
    def discordant(self) -> int:
        """Pairs that disagree about this bucket."""
        return self.only_a + self.only_b


def mcnemar(bucket: OutcomeBucket, only_a: int, only_b: int) -> McNemar:
    """The exact McNemar test of one bucket (see :class:`McNemar`)."""
    from scipy.stats import binomtest

    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)
    return McNemar(bucket=bucket, only_a=only_a, only_b=only_b, p_value=min(1.0, p))
