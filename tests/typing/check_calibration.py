"""Checked-only typing tests for the calibration API (mypy --strict, pyright strict).

Never run by pytest. Each ``# type: ignore[code]`` marks a negative case: when it
stops being an error, warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from typing import assert_never, assert_type

from probewise import (
    ArmTally,
    Calibration,
    CalibrationError,
    Complied,
    ControlVerdict,
    CorrectedRate,
    Deflected,
    Empty,
    HumanLabel,
    Outcome,
    ProbewiseError,
    Proportion,
    Refused,
    classify,
    compare_arms,
)
from probewise.responses import CorrectedComparison, CorrectionMethod, RubricBucket, ThreeWayRates


def word(label: HumanLabel) -> str:
    match label:
        case HumanLabel.COMPLIED:
            return "complied"
        case HumanLabel.DECLINED | HumanLabel.REFUSED | HumanLabel.DEFLECTED:
            return "declined"
        case _:
            assert_never(label)


def api(pairs: list[tuple[Outcome, HumanLabel]], tally: ArmTally) -> None:
    calibration = Calibration.of(pairs) + Calibration.of([(classify("a"), HumanLabel.DECLINED)])
    assert_type(calibration, Calibration)
    assert_type(calibration.matrix, tuple[tuple[int, ...], ...])
    assert_type(calibration.count(Refused, HumanLabel.REFUSED), int)
    bucket: RubricBucket = Deflected
    assert_type(calibration.count(bucket, HumanLabel.DEFLECTED), int)
    assert_type(calibration.recall(), Proportion)
    assert_type(calibration.specificity(HumanLabel.REFUSED, confidence=0.9), Proportion)
    assert_type(calibration.youden, float)
    assert_type(calibration.has_split, bool)
    assert_type(HumanLabel.REFUSED.declined, bool)
    assert_type(Calibration.from_dict(calibration.to_dict()), Calibration)
    try:
        rate = calibration.correct(tally, confidence=0.9)
    except CalibrationError as error:
        assert_type(error, CalibrationError)
        base: ProbewiseError = error
        assert_type(str(base), str)
        return
    assert_type(rate, CorrectedRate)
    assert_type(rate.estimate, float)
    assert_type(rate.low, float)
    assert_type(rate.high, float)
    assert_type(rate.observed, Proportion)
    assert_type(rate.n, int)
    assert_type(rate.clipped, bool)
    assert_type(rate.method, CorrectionMethod)
    assert_type(rate.three_way, ThreeWayRates | None)
    if rate.three_way is not None:
        assert_type(rate.three_way.deflected, float)
    comparison = calibration.compare(tally, tally)
    assert_type(comparison, CorrectedComparison)
    assert_type(comparison.rates_differ, bool)
    verdict = compare_arms(tally, tally, calibration=calibration)
    assert_type(verdict, ControlVerdict)
    assert_type(verdict.corrected, CorrectedComparison | None)
    compare_arms(tally, tally, calibration=None)


def negatives(calibration: Calibration, tally: ArmTally) -> None:
    calibration.count(Empty, HumanLabel.COMPLIED)  # type: ignore[arg-type]
    Calibration.of([(Complied(), "complied")])  # type: ignore[list-item]
    calibration.correct(tally, 0.9)  # type: ignore[call-arg]
    compare_arms(tally, tally, calibration=tally)  # type: ignore[arg-type]
