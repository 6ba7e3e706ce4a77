"""compare_arms(): the deflection count as a free control."""

from __future__ import annotations

import enum
import math
from typing import cast, final

import attrs

from probewise import _json
from probewise._validation import checked_type
from probewise._validation import count as _count
from probewise._validation import unit_or_nan as _unit_or_nan
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses.calibration import Calibration, CorrectedComparison
from probewise.responses.outcome import Deflected
from probewise.responses.stats import ArmTally, Proportion

__all__ = ["ControlState", "ControlVerdict", "compare_arms"]


class ControlState(enum.Enum):
    """What the two arms' deflection counts say about the refusal rules."""

    REGEX_SOUND = "regex_sound"
    """No deflection in either arm: the model is binary, the refusal rules are sound."""
    ONE_ARM = "one_arm"
    """Deflections in one arm only: the difference between the arms is real."""
    BOTH_ARMS = "both_arms"
    """Deflections in both: a refusal regex undercounts in both; compare both rates."""
    UNRELIABLE = "unreliable"
    """An arm has no answered completion, or too many Empty/Error outcomes."""


@_json.shaped(
    _json.Shape(
        after={"rates_differ": "p_value"},
        nan_as_none={"p_value", "failed_share_a", "failed_share_b"},
        omit_if_none={"corrected"},
    )
)
@final
@attrs.frozen(kw_only=True)
class ControlVerdict:
    """The control's verdict, with every figure it rests on.

    ``p_value`` is Fisher's exact test (two-sided) on deflected versus other answered
    outcomes in the two arms (NaN when an arm has no answered outcome).
    ``failed_share_*`` is (empty + error) / n per arm (NaN for an empty arm).
    ``corrected`` holds both arms' declined rates corrected for the rubric's measured
    error, their difference and its test, when ``compare_arms`` was given a
    :class:`~probewise.Calibration` (else ``None``).
    """

    state: ControlState = attrs.field(validator=checked_type(ControlState))
    deflected_a: int = attrs.field(validator=_count)
    deflected_b: int = attrs.field(validator=_count)
    p_value: float = attrs.field(validator=_unit_or_nan)
    failed_share_a: float = attrs.field(validator=_unit_or_nan)
    failed_share_b: float = attrs.field(validator=_unit_or_nan)
    rate_a: Proportion
    rate_b: Proportion
    alpha: float
    corrected: CorrectedComparison | None = None

    @property
    def rates_differ(self) -> bool:
        """Whether the deflection rates differ at ``alpha`` (Fisher's exact test)."""
        return not math.isnan(self.p_value) and self.p_value < self.alpha

    def summary(self) -> str:
        """One sentence for people (two with a calibration: the corrected rates)."""
        if self.corrected is None:
            return self._control_summary()
        return f"{self._control_summary()}; {self.corrected}"

    def _control_summary(self) -> str:
        match self.state:
            case ControlState.REGEX_SOUND:
                return "no deflections in either arm: the model is binary and the refusal rules are sound"
            case ControlState.ONE_ARM:
                arm = "A" if self.deflected_a else "B"
                return f"deflections in arm {arm} only: the difference between the arms is real"
            case ControlState.BOTH_ARMS:
                differ = "differ" if self.rates_differ else "do not differ"
                return (
                    "deflections in both arms: a refusal regex undercounts in both; the "
                    f"deflection rates {differ} (Fisher p = {self.p_value:.3g}, alpha = {self.alpha})"
                )
            case ControlState.UNRELIABLE:
                return (
                    "unreliable: an arm has no answered completion or too many Empty/Error "
                    "outcomes; the figures are reported but support no conclusion"
                )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values (NaN becomes ``None``)."""
        return _json.to_dict(self)


def _failed_share(tally: ArmTally) -> float:
    return (tally.empty + tally.error) / tally.n if tally.n else math.nan


def compare_arms(
    a: ArmTally,
    b: ArmTally,
    *,
    alpha: float = 0.05,
    max_failed_share: float = 0.1,
    calibration: Calibration | None = None,
) -> ControlVerdict:
    """Read the deflection control across two arms (it does not care which arm is which).

    With a ``calibration`` (a labelled sample of the same rubric on the same kind of
    completions), ``corrected`` also compares the arms' declined rates corrected for
    the rubric's measured error, at confidence ``1 - alpha``
    (:meth:`Calibration.compare`); a calibration that cannot correct raises
    :class:`~probewise.CalibrationError`.
    """
    if not isinstance(cast("object", a), ArmTally) or not isinstance(cast("object", b), ArmTally):
        raise ArgumentTypeError("compare_arms takes two ArmTally values")
    if calibration is not None and not isinstance(cast("object", calibration), Calibration):
        raise ArgumentTypeError("compare_arms's calibration must be a Calibration or None")
    if not 0.0 < alpha < 1.0:
        raise InvalidInputError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not 0.0 <= max_failed_share <= 1.0:
        raise InvalidInputError(f"max_failed_share must lie in [0, 1], got {max_failed_share!r}")
    failed_a, failed_b = _failed_share(a), _failed_share(b)
    if a.answered and b.answered:
        import numpy as np
        from scipy.stats import fisher_exact

        table = np.array(
            [
                [a.deflected, a.answered - a.deflected],
                [b.deflected, b.answered - b.deflected],
            ]
        )
        p_value = min(1.0, float(fisher_exact(table, alternative="two-sided").pvalue))
    else:
        p_value = math.nan
    if (
        not a.answered
        or not b.answered
        or failed_a > max_failed_share
        or failed_b > max_failed_share
    ):
        state = ControlState.UNRELIABLE
    elif a.deflected == 0 and b.deflected == 0:
        state = ControlState.REGEX_SOUND
    elif a.deflected == 0 or b.deflected == 0:
        state = ControlState.ONE_ARM
    else:
        state = ControlState.BOTH_ARMS
    return ControlVerdict(
        state=state,
        deflected_a=a.deflected,
        deflected_b=b.deflected,
        p_value=p_value,
        failed_share_a=failed_a,
        failed_share_b=failed_b,
        rate_a=a.rate(Deflected),
        rate_b=b.rate(Deflected),
        alpha=alpha,
        corrected=None if calibration is None else calibration.compare(a, b, confidence=1 - alpha),
    )
