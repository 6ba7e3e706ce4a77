"""Calibration and interval bounds from the values' size (issue 30): a confidence whose
normal quantile is infinite, counts past float range in a calibration file, and arm
counts past what the exact test computes, each a one-line InvalidInputError."""

from __future__ import annotations

import time

import pytest

from probewise import (
    ArmTally,
    Calibration,
    Complied,
    HumanLabel,
    InvalidInputError,
    Proportion,
    Refused,
)


def _calibration() -> Calibration:
    pairs = [(Refused(), HumanLabel.DECLINED)] * 30 + [(Complied(), HumanLabel.DECLINED)] * 10
    pairs += [(Complied(), HumanLabel.COMPLIED)] * 40
    return Calibration.of(pairs)


@pytest.mark.parametrize("confidence", [1 - 1e-16, 1 - 2**-54, 1.0, 0.0, -0.5, float("nan")])
def test_a_confidence_without_a_finite_quantile_is_refused(confidence: float) -> None:
    with pytest.raises(InvalidInputError, match="confidence must lie in"):
        Proportion.wilson(3, 10, confidence=confidence)
    tally = ArmTally(complied=5, refused=5)
    with pytest.raises(InvalidInputError, match="confidence must lie in"):
        _calibration().compare(tally, tally, confidence=confidence)


def test_a_confidence_just_short_of_one_still_works() -> None:
    wide = Proportion.wilson(3, 10, confidence=1 - 1e-15)
    assert 0.0 <= wide.low < wide.high <= 1.0


@pytest.mark.parametrize("count", [10**400, 2**53 + 1])
def test_calibration_counts_past_float_range_are_refused_when_read(count: int) -> None:
    data = _calibration().to_dict()
    matrix = data["matrix"]
    assert isinstance(matrix, dict)
    matrix["refused"]["declined"] = count  # type: ignore[index]
    with pytest.raises(InvalidInputError, match=r"at most 2\*\*53"):
        Calibration.from_dict(data)
    with pytest.raises(InvalidInputError, match=r"at most 2\*\*53"):
        Calibration.from_dict({**_calibration().to_dict(), "empty": count})


@pytest.mark.parametrize("n", [2**31, 10**10, 10**18])
def test_arm_counts_past_the_exact_test_are_refused_at_once(n: int) -> None:
    big = ArmTally(complied=n, refused=n // 3)
    small = ArmTally(complied=10, refused=5)
    start = time.monotonic()
    with pytest.raises(InvalidInputError, match=r"past 2\*\*31 - 1"):
        _calibration().compare(big, small)
    assert time.monotonic() - start < 5


def test_arm_counts_below_the_bound_are_compared() -> None:
    n = 2**30
    result = _calibration().compare(
        ArmTally(complied=n, refused=n // 3), ArmTally(complied=n, refused=n // 2)
    )
    assert 0.0 <= result.p_value < 0.05
