"""What :class:`~probewise.responses.calibration.Calibration` builds: a declined rate
corrected for the rubric's measured error (:class:`CorrectedRate`, with the three-way
shares of :class:`ThreeWayRates`), and two arms' rates compared
(:class:`CorrectedComparison`). Plain values, beneath the calibration that computes
them; :mod:`probewise.responses.calibration` names them too.
"""

from __future__ import annotations

import enum
import math
from typing import cast, final

import attrs

from probewise import _json
from probewise._validation import checked_type
from probewise._validation import count as _count
from probewise._validation import unit_or_nan as _unit_or_nan
from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.responses.stats import Proportion

__all__ = ["CorrectedComparison", "CorrectedRate", "CorrectionMethod", "ThreeWayRates"]


class CorrectionMethod(enum.Enum):
    """How a corrected rate and its interval were computed."""

    LANG_REICZIGEL = "lang_reiczigel"
    """Rogan-Gladen point estimate; Lang & Reiczigel (2014) adjusted interval."""


def _check_interval(name: str, value: float, low: float, high: float) -> None:
    """``low <= high``, and ``value`` inside ``[low, high]`` unless it is NaN."""
    if not low <= high:
        raise InvalidInputError(f"low ({low}) exceeds high ({high})")
    if not math.isnan(value) and not low <= value <= high:
        raise InvalidInputError(f"{name} ({value}) lies outside [low, high]")


@final
@attrs.frozen(kw_only=True)
class ThreeWayRates:
    """Corrected complied / refused / deflected shares of an arm's answers (they sum to 1),
    each with an interval at the enclosing :class:`CorrectedRate`'s ``confidence``.

    The point estimates invert the 3 x 3 misclassification matrix measured on a
    labelled sample with the split (observed shares = matrix @ true shares). Sampling
    noise can put the solution outside the simplex: negative shares are then set to 0
    and the rest renormalised, and ``clipped`` is true.

    The intervals are Bayesian: each human class's column of the matrix and the arm's
    observed shares get independent Dirichlet posteriors (Jeffreys prior, 1/2 per
    cell), 4000 draws (a fixed seed, so the same counts give the same interval) are
    inverted, clipped and renormalised the same way, and the central ``confidence``
    share of each component is kept, widened where needed to contain the point
    estimate. The tests assert their 95% coverage (0.91-0.99 of 300 seeded runs per
    component) and the point estimates' lack of bias by simulation.
    """

    complied: float = attrs.field(validator=_unit_or_nan)
    refused: float = attrs.field(validator=_unit_or_nan)
    deflected: float = attrs.field(validator=_unit_or_nan)
    complied_low: float = attrs.field(validator=_unit_or_nan)
    complied_high: float = attrs.field(validator=_unit_or_nan)
    refused_low: float = attrs.field(validator=_unit_or_nan)
    refused_high: float = attrs.field(validator=_unit_or_nan)
    deflected_low: float = attrs.field(validator=_unit_or_nan)
    deflected_high: float = attrs.field(validator=_unit_or_nan)
    clipped: bool = attrs.field(validator=checked_type(bool))

    def __attrs_post_init__(self) -> None:
        for name in ("complied", "refused", "deflected"):
            low, value, high = (getattr(self, f"{name}{end}") for end in ("_low", "", "_high"))
            if not low <= value <= high:
                raise InvalidInputError(f"{name} ({value}) lies outside [{low}, {high}]")

    def __str__(self) -> str:
        clipped = " (clipped)" if self.clipped else ""
        return (
            ", ".join(
                f"{name} {getattr(self, name):.1%} [{getattr(self, name + '_low'):.1%}, "
                f"{getattr(self, name + '_high'):.1%}]"
                for name in ("complied", "refused", "deflected")
            )
            + clipped
        )

    def to_dict(self) -> dict[str, float | bool]:
        """JSON-ready values."""
        return cast("dict[str, float | bool]", _json.to_dict(self))


@_json.shaped(_json.Shape(after={"n": "method"}, nan_as_none={"estimate"}))
@final
@attrs.frozen(kw_only=True)
class CorrectedRate:
    """An arm's declined rate (Refused or Deflected over answered) corrected for the
    rubric's measured error, with its interval at ``confidence``.

    ``observed`` is the rate as the rubric counted it (Wilson interval, the arm's
    sampling only); ``estimate`` is the Rogan-Gladen value, clipped to [0, 1]
    (``clipped`` says when it had to be); ``low`` and ``high`` carry the uncertainty
    of both the arm and the labelled sample. With no answered outcome the estimate is
    NaN and the interval [0, 1]. ``empty`` and ``error`` are the arm's counts of
    outcomes left out. ``three_way`` holds corrected complied / refused / deflected
    shares when the labels split declines (else ``None``).
    """

    observed: Proportion
    estimate: float = attrs.field(validator=_unit_or_nan)
    low: float = attrs.field(validator=_unit_or_nan)
    high: float = attrs.field(validator=_unit_or_nan)
    clipped: bool = attrs.field(validator=checked_type(bool))
    sensitivity: Proportion
    specificity: Proportion
    confidence: float = attrs.field(validator=_unit_or_nan)
    method: CorrectionMethod = attrs.field(validator=checked_type(CorrectionMethod))
    empty: int = attrs.field(validator=_count)
    error: int = attrs.field(validator=_count)
    three_way: ThreeWayRates | None = None

    def __attrs_post_init__(self) -> None:
        _check_interval("estimate", self.estimate, self.low, self.high)

    @property
    def n(self) -> int:
        """The arm's answered outcomes (complied + refused + deflected)."""
        return self.observed.trials

    def __str__(self) -> str:
        if self.n == 0:
            return "n/a (0 answered)"
        return (
            f"{self.estimate:.1%} [{self.low:.1%}, {self.high:.1%}] corrected "
            f"(observed {self.observed.estimate:.1%} of {self.n})"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values (NaN becomes ``None``)."""
        return _json.to_dict(self)


def _difference_bound(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if not isinstance(value, float | int):
        raise ArgumentTypeValueError(
            f"{attribute.name} must lie in [-1, 1], got {type(value).__name__}"
        )
    if not (math.isnan(value) or -1.0 <= value <= 1.0):
        raise InvalidInputError(f"{attribute.name} must lie in [-1, 1], got {value!r}")


@_json.shaped(_json.Shape(after={"rates_differ": "p_value"}, nan_as_none={"difference", "p_value"}))
@final
@attrs.frozen(kw_only=True)
class CorrectedComparison:
    """Two arms' corrected declined rates and their difference ``a - b``.

    ``low`` / ``high`` bound the difference at ``confidence`` (delta method on
    Agresti-Caffo-adjusted arm rates and adjusted sensitivity and specificity, as for
    :class:`CorrectedRate`; the two rates share the labelled sample, which the
    interval accounts for). ``p_value`` is Fisher's exact test (two-sided) on declined
    versus complied answers in the two arms: with J > 0 and the same rubric on both
    arms, equal true rates give equal observed rates, so this exact test of the counts
    is a test of equal corrected rates. NaN (and [-1, 1]) when an arm has no answer.
    """

    a: CorrectedRate
    b: CorrectedRate
    difference: float = attrs.field(validator=_difference_bound)
    low: float = attrs.field(validator=_difference_bound)
    high: float = attrs.field(validator=_difference_bound)
    p_value: float = attrs.field(validator=_unit_or_nan)
    confidence: float = attrs.field(validator=_unit_or_nan)

    def __attrs_post_init__(self) -> None:
        _check_interval("difference", self.difference, self.low, self.high)

    @property
    def rates_differ(self) -> bool:
        """Whether the corrected rates differ at ``1 - confidence`` (Fisher's exact test)."""
        return not math.isnan(self.p_value) and self.p_value < 1.0 - self.confidence

    def __str__(self) -> str:
        if math.isnan(self.difference):
            return f"corrected declined rates: A {self.a}, B {self.b}"
        return (
            f"corrected declined rates: A {self.a}, B {self.b}; difference "
            f"{self.difference:+.1%} [{self.low:+.1%}, {self.high:+.1%}] "
            f"(Fisher p = {self.p_value:.3g})"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values (NaN becomes ``None``)."""
        return _json.to_dict(self)
