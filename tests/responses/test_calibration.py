"""Calibration: the rubric's measured error inside the estimate.

The simulations draw a rubric of known sensitivity and specificity over seeded runs
(numpy's default_rng, one seed per test) and check the corrected rate against the
truth it was drawn from. No completion text is involved anywhere: outcomes and
labels are counts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import attrs
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from probewise import (
    ArmTally,
    Calibration,
    CalibrationError,
    Complied,
    ControlState,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    HumanLabel,
    InvalidInputError,
    Outcome,
    ProbewiseError,
    Proportion,
    Refused,
    compare_arms,
)
from probewise.responses import CorrectionMethod

# Rows of Calibration.matrix: Complied, Refused, Deflected; columns in HumanLabel order.
C, DEC, R, D = (list(HumanLabel).index(label) for label in HumanLabel)


def _binary(
    rng: np.random.Generator, declines: int, answers: int, se: float, sp: float
) -> Calibration:
    """A labelled sample: ``declines`` rows a human called DECLINED, ``answers`` COMPLIED."""
    caught = int(rng.binomial(declines, se))
    kept = int(rng.binomial(answers, sp))
    matrix = [[0] * 4 for _ in range(3)]
    matrix[0][DEC], matrix[1][DEC] = declines - caught, caught
    matrix[0][C], matrix[1][C] = kept, answers - kept
    return Calibration(matrix=matrix)


def _arm(rng: np.random.Generator, n: int, truth: float, se: float, sp: float) -> ArmTally:
    """An arm of ``n`` answers whose true declined rate is ``truth``, counted by the rubric."""
    declined = int(rng.binomial(n, truth))
    flagged = int(rng.binomial(declined, se)) + int(rng.binomial(n - declined, 1.0 - sp))
    return ArmTally(refused=flagged, complied=n - flagged)


@dataclass(frozen=True)
class Cell:
    truth: float
    se: float
    sp: float
    n: int
    declines: int
    answers: int


# Interior true rates (clipping at 0 or 1 biases any estimator there, by design); a
# strong, a middling and a weak rubric, the last like the measured deflection recall.
CELLS = [
    Cell(truth=0.30, se=0.70, sp=0.95, n=1000, declines=200, answers=200),
    Cell(truth=0.60, se=0.50, sp=0.90, n=400, declines=150, answers=150),
    Cell(truth=0.40, se=0.90, sp=0.98, n=300, declines=80, answers=120),
]
RUNS = 1000


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"pi{c.truth}-se{c.se}-sp{c.sp}")
def test_corrected_rate_is_unbiased_and_covers(cell: Cell) -> None:
    rng = np.random.default_rng(20261205)
    estimates, observed, covered = [], [], 0
    for _ in range(RUNS):
        calibration = _binary(rng, cell.declines, cell.answers, cell.se, cell.sp)
        rate = calibration.correct(_arm(rng, cell.n, cell.truth, cell.se, cell.sp))
        estimates.append(rate.estimate)
        observed.append(rate.observed.estimate)
        covered += rate.low <= cell.truth <= rate.high
    errors = np.array(estimates) - cell.truth
    # Four standard errors of the mean error: an unbiased estimator fails this with
    # probability about 6e-5. The observed (uncorrected) rate must fail it, or the
    # cell would not test anything.
    tolerance = 4.0 * float(errors.std(ddof=1)) / math.sqrt(RUNS)
    assert abs(float(errors.mean())) < tolerance, (float(errors.mean()), tolerance)
    assert abs(float(np.mean(observed)) - cell.truth) > 5 * tolerance
    # 95% intervals: with 1000 runs the binomial standard deviation of the coverage is
    # 0.007; [0.925, 0.985] is about -3.5 to +5 of them around 0.95, the upper side
    # wider because the method is mildly conservative by design.
    assert 0.925 <= covered / RUNS <= 0.985, covered / RUNS


def test_difference_covers_and_the_test_holds_its_size() -> None:
    rng = np.random.default_rng(17)
    runs = 300
    for truth_a, truth_b in [(0.3, 0.3), (0.2, 0.4)]:
        covered = rejected = 0
        for _ in range(runs):
            calibration = _binary(rng, 120, 120, 0.7, 0.93)
            a = _arm(rng, 500, truth_a, 0.7, 0.93)
            b = _arm(rng, 500, truth_b, 0.7, 0.93)
            comparison = calibration.compare(a, b)
            covered += comparison.low <= truth_a - truth_b <= comparison.high
            rejected += comparison.rates_differ
            assert comparison.low <= comparison.difference <= comparison.high
        # 300 runs: the coverage's standard deviation is 0.013; 0.91 is 3 of them.
        assert 0.91 <= covered / runs <= 0.99, (truth_a, truth_b, covered / runs)
        if truth_a == truth_b:
            # Fisher's exact test is conservative: size at most 0.05 plus 3 sd (0.038).
            assert rejected / runs <= 0.088
        else:
            assert rejected / runs >= 0.8  # a 0.2 difference on 500 answers per arm


def test_three_way_rates_are_unbiased_and_cover() -> None:
    # m[i][j] = P(rubric bucket i | human label j), rows Complied, Refused, Deflected,
    # columns COMPLIED, REFUSED, DEFLECTED: the rubric misses deflections most.
    m = np.array([[0.95, 0.10, 0.55], [0.02, 0.85, 0.05], [0.03, 0.05, 0.40]])
    truth = np.array([0.5, 0.3, 0.2])
    rng = np.random.default_rng(3)
    runs, per_class, n = 300, 300, 1000
    found, covered = [], np.zeros(3)
    for _ in range(runs):
        matrix = [[0] * 4 for _ in range(3)]
        for j, column in zip(range(3), (C, R, D), strict=True):
            for i, count in enumerate(rng.multinomial(per_class, m[:, j])):
                matrix[i][column] = int(count)
        complied, refused, deflected = (int(x) for x in rng.multinomial(n, m @ truth))
        calibration = Calibration(matrix=matrix)
        assert calibration.has_split
        rate = calibration.correct(
            ArmTally(complied=complied, refused=refused, deflected=deflected)
        )
        assert rate.three_way is not None
        shares = rate.three_way.complied, rate.three_way.refused, rate.three_way.deflected
        assert sum(shares) == pytest.approx(1.0)
        found.append(shares)
        three = rate.three_way
        covered += [
            three.complied_low <= truth[0] <= three.complied_high,
            three.refused_low <= truth[1] <= three.refused_high,
            three.deflected_low <= truth[2] <= three.deflected_high,
        ]
    estimates = np.array(found)
    tolerance = 4.0 * estimates.std(axis=0, ddof=1) / math.sqrt(runs)
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < tolerance)
    observed_deflected = (m @ truth)[2]
    assert abs(observed_deflected - truth[2]) > 5 * tolerance[2]
    # 300 runs: the coverage's standard deviation is 0.0126; 0.91 is 3.2 of them.
    assert np.all((covered / runs >= 0.91) & (covered / runs <= 0.99)), covered / runs


answers = st.sampled_from([Complied(), Refused(), Deflected()])
outcomes = st.one_of(
    answers, st.just(Empty()), st.builds(Error, kind=st.sampled_from(list(ErrorKind)))
)
labels = st.sampled_from(list(HumanLabel))
pairs = st.lists(st.tuples(outcomes, labels), max_size=60)


@given(pairs, pairs)
def test_of_concatenation_is_the_sum(
    first: list[tuple[Outcome, HumanLabel]], second: list[tuple[Outcome, HumanLabel]]
) -> None:
    joined = Calibration.of(first + second)
    assert joined == Calibration.of(first) + Calibration.of(second)
    assert joined == Calibration.of(second) + Calibration.of(first)
    assert joined + Calibration() == joined
    assert joined.n == len(first) + len(second)
    excluded = sum(isinstance(o, Empty | Error) for o, _ in first + second)
    assert joined.excluded == excluded == joined.empty + joined.error


@given(pairs)
def test_counts_and_round_trip(rows: list[tuple[Outcome, HumanLabel]]) -> None:
    calibration = Calibration.of(rows)
    for bucket in (Complied, Refused, Deflected):
        for label in HumanLabel:
            expected = sum(type(o) is bucket and lab is label for o, lab in rows)
            assert calibration.count(bucket, label) == expected
    data = json.loads(json.dumps(calibration.to_dict()))
    assert Calibration.from_dict(data) == calibration


def _calibrations() -> st.SearchStrategy[Calibration]:
    cell = st.integers(min_value=0, max_value=400)
    return st.builds(
        lambda cells: Calibration(matrix=[cells[0:4], cells[4:8], cells[8:12]]),
        st.lists(cell, min_size=12, max_size=12),
    )


arm_counts = st.integers(min_value=0, max_value=5000)


@given(_calibrations(), arm_counts, arm_counts, arm_counts, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_interval_contains_estimate_and_is_monotone(
    calibration: Calibration, complied: int, refused: int, deflected: int, confidence: float
) -> None:
    tally = ArmTally(complied=complied, refused=refused, deflected=deflected)
    try:
        rate = calibration.correct(tally, confidence=confidence)
    except CalibrationError:
        assume(False)
        raise
    assert 0.0 <= rate.low <= rate.high <= 1.0
    if tally.answered == 0:
        assert math.isnan(rate.estimate)
        assert (rate.low, rate.high) == (0.0, 1.0)
        return
    assert rate.low <= rate.estimate <= rate.high
    assert rate.n == tally.answered
    assert rate.method is CorrectionMethod.LANG_REICZIGEL
    if complied:
        # One answer more counted declined never lowers the corrected rate.
        more = ArmTally(complied=complied - 1, refused=refused + 1, deflected=deflected)
        assert calibration.correct(more, confidence=confidence).estimate >= rate.estimate
    json.dumps(rate.to_dict())


@given(
    st.integers(min_value=3, max_value=200),
    st.integers(min_value=3, max_value=200),
    st.integers(min_value=0, max_value=200),
    arm_counts,
    arm_counts,
    arm_counts,
)
def test_perfect_rubric_changes_nothing(
    answers_: int, refusals: int, deflections: int, complied: int, refused: int, deflected: int
) -> None:
    matrix = [[0] * 4 for _ in range(3)]
    matrix[0][C], matrix[1][R], matrix[2][D] = answers_, refusals, deflections
    calibration = Calibration(matrix=matrix)
    tally = ArmTally(complied=complied, refused=refused, deflected=deflected)
    assume(tally.answered > 0)
    rate = calibration.correct(tally)
    assert rate.estimate == pytest.approx(rate.observed.estimate, abs=1e-12)
    assert not rate.clipped
    if deflections:
        assert rate.three_way is not None
        assert rate.three_way.refused == pytest.approx(refused / tally.answered, abs=1e-12)
        assert rate.three_way.deflected == pytest.approx(deflected / tally.answered, abs=1e-12)
    else:
        assert rate.three_way is None  # no DEFLECTED row: the 3 x 3 matrix is singular


@pytest.mark.parametrize(
    ("caught", "declines", "kept", "answers_"),
    [
        (50, 100, 50, 100),  # J = 0: chance
        (30, 100, 60, 100),  # J < 0: worse than chance
        (7, 10, 7, 10),  # J = 0.4, but ten rows a class cannot tell it from 0
        (0, 0, 90, 100),  # no labelled decline
        (90, 100, 0, 0),  # no labelled answer
    ],
)
def test_no_confident_number_from_a_chance_rubric(
    caught: int, declines: int, kept: int, answers_: int
) -> None:
    matrix = [[0] * 4 for _ in range(3)]
    matrix[0][DEC], matrix[1][DEC] = declines - caught, caught
    matrix[0][C], matrix[1][C] = kept, answers_ - kept
    calibration = Calibration(matrix=matrix)
    tally = ArmTally(complied=700, refused=300)
    with pytest.raises(CalibrationError) as raised:
        calibration.correct(tally)
    assert isinstance(raised.value, ProbewiseError)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(CalibrationError):
        compare_arms(tally, tally, calibration=calibration)


def test_empty_and_error_stay_out() -> None:
    base = [(Complied(), HumanLabel.COMPLIED)] * 40 + [(Complied(), HumanLabel.REFUSED)] * 10
    base += [(Refused(), HumanLabel.REFUSED)] * 30 + [(Refused(), HumanLabel.COMPLIED)] * 2
    base += [(Deflected(), HumanLabel.DEFLECTED)] * 15 + [(Complied(), HumanLabel.DEFLECTED)] * 15
    noise: list[tuple[Outcome, HumanLabel]] = [
        (Empty(), HumanLabel.COMPLIED),
        (Empty(truncated=True), HumanLabel.REFUSED),
        (Error(kind=ErrorKind.GENERATION), HumanLabel.DECLINED),
    ]
    clean, noisy = Calibration.of(base), Calibration.of(base + noise)
    assert noisy.matrix == clean.matrix
    assert (noisy.empty, noisy.error, noisy.excluded) == (2, 1, 3)
    assert noisy.labelled == clean.labelled == len(base)
    tally = ArmTally(complied=300, refused=150, deflected=50)
    failing = tally + ArmTally(empty=40, error=9)
    rate, rate_failing = clean.correct(tally), noisy.correct(failing)
    assert rate_failing.estimate == rate.estimate
    assert (rate_failing.low, rate_failing.high) == (rate.low, rate.high)
    assert (rate_failing.empty, rate_failing.error) == (40, 9)
    assert rate_failing.n == tally.answered


def test_recall_and_specificity_read_the_matrix() -> None:
    rows: list[tuple[Outcome, HumanLabel]] = []
    spec = {
        (Complied, HumanLabel.COMPLIED): 80,
        (Refused, HumanLabel.COMPLIED): 3,
        (Deflected, HumanLabel.COMPLIED): 5,
        (Complied, HumanLabel.REFUSED): 4,
        (Refused, HumanLabel.REFUSED): 40,
        (Deflected, HumanLabel.REFUSED): 2,
        (Complied, HumanLabel.DEFLECTED): 20,
        (Refused, HumanLabel.DEFLECTED): 1,
        (Deflected, HumanLabel.DEFLECTED): 9,
    }
    for (bucket, label), count in spec.items():
        rows += [(bucket(), label)] * count
    calibration = Calibration.of(rows)
    assert calibration.has_split
    assert calibration.recall() == Proportion.wilson(40 + 2 + 1 + 9, 46 + 30)
    assert calibration.specificity() == Proportion.wilson(80, 88)
    assert calibration.recall(HumanLabel.COMPLIED) == calibration.specificity()
    assert calibration.specificity(HumanLabel.COMPLIED) == calibration.recall()
    assert calibration.recall(HumanLabel.REFUSED) == Proportion.wilson(40, 46)
    assert calibration.recall(HumanLabel.DEFLECTED, confidence=0.9) == Proportion.wilson(
        9, 30, confidence=0.9
    )
    assert calibration.specificity(HumanLabel.REFUSED) == Proportion.wilson(80 + 5 + 20 + 9, 118)
    assert calibration.specificity(HumanLabel.DEFLECTED) == Proportion.wilson(80 + 3 + 4 + 40, 134)
    assert calibration.youden == pytest.approx(52 / 76 + 80 / 88 - 1)
    # A DECLINED label anywhere means the split is not there.
    mixed = calibration + Calibration.of([(Refused(), HumanLabel.DECLINED)])
    assert not mixed.has_split
    assert mixed.correct(ArmTally(complied=10, refused=5, deflected=5)).three_way is None
    assert math.isnan(Calibration().youden)


def _strong(rng_seed: int = 1) -> Calibration:
    return _binary(np.random.default_rng(rng_seed), 200, 200, 0.75, 0.95)


def test_compare_arms_without_calibration_is_unchanged() -> None:
    a = ArmTally(complied=60, refused=30, deflected=10)
    b = ArmTally(complied=40, refused=45, deflected=15, empty=2)
    plain = compare_arms(a, b)
    assert plain.corrected is None
    assert "corrected" not in plain.to_dict()
    calibrated = compare_arms(a, b, calibration=_strong())
    assert calibrated.corrected is not None
    # Every control figure is the same; only the corrected comparison is added.
    assert {k: v for k, v in calibrated.to_dict().items() if k != "corrected"} == plain.to_dict()
    assert calibrated.summary().startswith(plain.summary())
    assert "corrected declined rates" in calibrated.summary()
    json.dumps(calibrated.to_dict())


@given(arm_counts, arm_counts, arm_counts, arm_counts)
def test_corrected_comparison_is_antisymmetric(ca: int, ra: int, cb: int, rb: int) -> None:
    calibration = _strong()
    a, b = ArmTally(complied=ca, refused=ra), ArmTally(complied=cb, refused=rb)
    ab, ba = (
        compare_arms(a, b, calibration=calibration),
        compare_arms(b, a, calibration=calibration),
    )
    assert ab.corrected is not None
    assert ba.corrected is not None
    if not a.answered or not b.answered:
        assert ab.state is ControlState.UNRELIABLE
        assert math.isnan(ab.corrected.difference)
        assert (ab.corrected.low, ab.corrected.high) == (-1.0, 1.0)
        return
    assert ab.corrected.difference == pytest.approx(-ba.corrected.difference, abs=1e-12)
    assert ab.corrected.low == pytest.approx(-ba.corrected.high, abs=1e-12)
    assert ab.corrected.p_value == pytest.approx(ba.corrected.p_value)
    assert ab.corrected.low <= ab.corrected.difference <= ab.corrected.high


def test_validation() -> None:
    with pytest.raises(TypeError, match="pair 1"):
        Calibration.of([(Complied(), HumanLabel.COMPLIED), (Complied(), "complied")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="pair 0"):
        Calibration.of([("text", HumanLabel.COMPLIED)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="counts"):
        Calibration(matrix=[[0, 0, 0, -1], [0] * 4, [0] * 4])
    with pytest.raises(ValueError, match="rows"):
        Calibration(matrix=[[0] * 4, [0] * 4])
    with pytest.raises(InvalidInputError, match="unknown Calibration fields"):
        Calibration.from_dict({"matrix": {}, "bogus": 1})
    with pytest.raises(InvalidInputError, match="unknown human label"):
        Calibration.from_dict({"matrix": {"refused": {"maybe": 1}}})
    with pytest.raises(InvalidInputError, match="empty"):
        Calibration.from_dict({"empty": -1})
    with pytest.raises(InvalidInputError, match="confidence"):
        _strong().correct(ArmTally(complied=1), confidence=1.0)
    with pytest.raises(TypeError):
        compare_arms(ArmTally(), ArmTally(), calibration="calibration")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _strong().count(Empty, HumanLabel.COMPLIED)  # type: ignore[arg-type]


def test_a_corrected_rate_or_difference_outside_its_interval_is_refused() -> None:
    matrix = [[0] * 4 for _ in range(3)]
    matrix[0][0], matrix[1][2], matrix[0][2] = 40, 30, 5
    calibration = Calibration(matrix=matrix)
    comparison = calibration.compare(
        ArmTally(complied=30, refused=20), ArmTally(complied=20, refused=30)
    )
    rate = comparison.a
    with pytest.raises(InvalidInputError, match=r"^low \(0\.9\) exceeds high \(0\.1\)$"):
        attrs.evolve(rate, low=0.9, high=0.1)
    with pytest.raises(InvalidInputError, match=r"^estimate \(0\.05\) lies outside \[low, high\]$"):
        attrs.evolve(rate, estimate=0.05, low=0.1, high=0.9)
    with pytest.raises(InvalidInputError, match=r"^low \(0\.5\) exceeds high \(-0\.5\)$"):
        attrs.evolve(comparison, low=0.5, high=-0.5)
    with pytest.raises(
        InvalidInputError, match=r"^difference \(0\.9\) lies outside \[low, high\]$"
    ):
        attrs.evolve(comparison, difference=0.9, low=-0.5, high=0.5)
