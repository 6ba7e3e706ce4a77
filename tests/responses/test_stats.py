from __future__ import annotations

import json
import math
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

from probewise import (
    ArmTally,
    Complied,
    ControlState,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    InvalidInputError,
    Proportion,
    Refused,
    compare_arms,
)

counts = st.integers(min_value=0, max_value=10_000)


@st.composite
def tallies(draw: st.DrawFn) -> ArmTally:
    c, d, r, e, x = (draw(counts) for _ in range(5))
    truncated = draw(st.integers(min_value=0, max_value=c + d + r + e))
    return ArmTally(complied=c, deflected=d, refused=r, empty=e, error=x, truncated=truncated)


@given(tallies())
def test_identity(a: ArmTally) -> None:
    assert a + ArmTally() == a
    assert ArmTally() + a == a


@given(tallies(), tallies())
def test_commutative(a: ArmTally, b: ArmTally) -> None:
    assert a + b == b + a


@given(tallies(), tallies(), tallies())
def test_associative(a: ArmTally, b: ArmTally, c: ArmTally) -> None:
    assert (a + b) + c == a + (b + c)


outcomes = st.one_of(
    st.builds(Complied, truncated=st.booleans()),
    st.builds(Deflected, truncated=st.booleans()),
    st.builds(Refused, truncated=st.booleans(), by_provider=st.booleans()),
    st.builds(Empty, truncated=st.booleans()),
    st.builds(Error, kind=st.sampled_from(list(ErrorKind))),
)


@given(st.lists(outcomes), st.lists(outcomes))
def test_of_is_a_homomorphism(xs: list[object], ys: list[object]) -> None:
    assert ArmTally.of(xs + ys) == ArmTally.of(xs) + ArmTally.of(ys)  # type: ignore[arg-type]
    tally = ArmTally.of(xs)  # type: ignore[arg-type]
    assert tally.n == len(xs)
    assert tally.truncated == sum(1 for o in xs if getattr(o, "truncated", False))


@given(tallies())
def test_json_round_trip(a: ArmTally) -> None:
    assert ArmTally.from_dict(json.loads(json.dumps(a.to_dict()))) == a


@given(
    st.integers(min_value=1, max_value=5000).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    ),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_wilson_matches_scipy(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    ours = Proportion.wilson(k, n, confidence=confidence)
    theirs = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert ours.low == pytest.approx(theirs.low, abs=1e-9)
    assert ours.high == pytest.approx(theirs.high, abs=1e-9)
    assert ours.low <= ours.estimate <= ours.high


def test_rates_say_their_denominator() -> None:
    tally = ArmTally(complied=6, deflected=2, refused=2, empty=5, error=5)
    assert tally.rate(Deflected).trials == 10
    assert tally.rate(Deflected, over="all").trials == 20
    assert tally.rate(Empty, over="all").successes == 5
    with pytest.raises(InvalidInputError):
        tally.rate(Error)
    zero = ArmTally().rate(Complied)
    assert zero.trials == 0
    assert math.isnan(zero.estimate)
    assert (zero.low, zero.high) == (0.0, 1.0)


def test_validation() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ArmTally(complied=-1)
    with pytest.raises(ValueError, match="truncated"):
        ArmTally(error=3, truncated=1)
    with pytest.raises(TypeError):
        ArmTally(complied=True)
    with pytest.raises(TypeError):
        ArmTally.of(["not an outcome"])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError):
        ArmTally.from_dict({"complied": 1, "bogus": 2})


def test_control_states() -> None:
    binary = ArmTally(complied=50, refused=50)
    assert compare_arms(binary, binary).state is ControlState.REGEX_SOUND
    assert compare_arms(binary, binary).p_value == pytest.approx(1.0)
    one = ArmTally(complied=50, refused=40, deflected=10)
    verdict = compare_arms(binary, one)
    assert verdict.state is ControlState.ONE_ARM
    assert (verdict.deflected_a, verdict.deflected_b) == (0, 10)
    assert compare_arms(one, binary).state is ControlState.ONE_ARM
    both = ArmTally(complied=50, refused=20, deflected=30)
    verdict = compare_arms(one, both)
    assert verdict.state is ControlState.BOTH_ARMS
    from scipy.stats import fisher_exact

    expected = fisher_exact([[10, 90], [30, 70]]).pvalue
    assert verdict.p_value == pytest.approx(float(expected))
    assert verdict.rates_differ
    failing = ArmTally(complied=50, empty=10, error=10)
    verdict = compare_arms(one, failing)
    assert verdict.state is ControlState.UNRELIABLE
    assert verdict.failed_share_b == pytest.approx(20 / 70)
    nothing = compare_arms(one, ArmTally())
    assert nothing.state is ControlState.UNRELIABLE
    assert math.isnan(nothing.p_value)
    assert json.loads(json.dumps(verdict.to_dict()))["state"] == "unreliable"


@given(tallies(), tallies())
def test_control_is_symmetric(a: ArmTally, b: ArmTally) -> None:
    ab, ba = compare_arms(a, b), compare_arms(b, a)
    assert ab.state is ba.state
    assert (ab.deflected_a, ab.deflected_b) == (ba.deflected_b, ba.deflected_a)
    if not math.isnan(ab.p_value):
        assert ab.p_value == pytest.approx(ba.p_value)


# Every error the API raises for a bad argument is a ProbewiseError that is also the
# fitting builtin, and its message names the argument.
TYPED_ERRORS: list[tuple[str, object, type[Exception], str]] = [
    ("wilson successes > trials", lambda: Proportion.wilson(5, 3), ValueError, "successes"),
    ("wilson negative trials", lambda: Proportion.wilson(0, -1), ValueError, "trials"),
    ("wilson float count", lambda: Proportion.wilson(1.5, 3), TypeError, "successes"),  # type: ignore[arg-type]
    (
        "wilson confidence",
        lambda: Proportion.wilson(1, 3, confidence=2.0),
        ValueError,
        "confidence",
    ),
    (
        "wilson confidence type",
        lambda: Proportion.wilson(1, 3, confidence="x"),
        TypeError,
        "confidence",
    ),  # type: ignore[arg-type]
    (
        "truncated above classified",
        lambda: ArmTally(complied=1, truncated=2),
        ValueError,
        "truncated",
    ),
    ("negative count", lambda: ArmTally(refused=-1), ValueError, "refused"),
    ("bool count", lambda: ArmTally(complied=True), TypeError, "complied"),
    ("not an outcome", lambda: ArmTally.of(["x"]), TypeError, "ArmTally.of"),  # type: ignore[list-item]
    ("count of a non-class", lambda: ArmTally().count("x"), TypeError, "ArmTally.count"),  # type: ignore[arg-type]
    ("rate over", lambda: ArmTally().rate(Complied, over="some"), ValueError, "over"),  # type: ignore[arg-type]
    (
        "proportion out of order",
        lambda: Proportion(successes=3, trials=2, estimate=0.5, low=0, high=1),
        ValueError,
        "successes",
    ),
    (
        "proportion estimate",
        lambda: Proportion(successes=1, trials=2, estimate=2.0, low=0, high=1),
        ValueError,
        "estimate",
    ),
]


@pytest.mark.parametrize(
    ("name", "call", "builtin", "field"), TYPED_ERRORS, ids=[t[0] for t in TYPED_ERRORS]
)
def test_api_errors_are_typed_and_name_the_field(
    name: str, call: object, builtin: type[Exception], field: str
) -> None:
    from probewise import ProbewiseError

    assert callable(call)
    with pytest.raises(ProbewiseError) as info:
        call()
    assert isinstance(info.value, builtin), name
    assert field in str(info.value), name


def test_compare_arms_and_its_verdict_raise_typed_errors_that_name_types_only() -> None:
    from probewise import (
        ArgumentTypeError,
        Calibration,
        ControlState,
        ControlVerdict,
        compare_arms,
    )
    from probewise.responses.stats import Proportion

    canary = "CANARY-compare-arms-7f3a"
    with pytest.raises(ArgumentTypeError, match="two ArmTally"):
        compare_arms(cast("ArmTally", canary), ArmTally())
    with pytest.raises(ArgumentTypeError, match="Calibration or None"):
        compare_arms(ArmTally(), ArmTally(), calibration=cast("Calibration", canary))
    rate = Proportion.wilson(0, 0)
    fields = {
        "state": ControlState.ONE_ARM,
        "deflected_a": 0,
        "deflected_b": 0,
        "p_value": 1.0,
        "failed_share_a": 0.0,
        "failed_share_b": 0.0,
        "rate_a": rate,
        "rate_b": rate,
        "alpha": 0.05,
    }
    ControlVerdict(**fields)  # the valid baseline builds
    for name, bad in (("state", canary), ("deflected_a", canary), ("deflected_b", -1)):
        with pytest.raises((ArgumentTypeError, InvalidInputError)) as caught:
            ControlVerdict(**{**fields, name: bad})
        assert canary not in str(caught.value)
        assert name in str(caught.value)
