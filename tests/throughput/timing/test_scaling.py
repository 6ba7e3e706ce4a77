"""ScalingFit: coefficients recovered within their errors, three lengths or none."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise.errors import InsufficientPointsError, InvalidInputError
from probewise.throughput.timing.scaling import (
    ExtrapolationWarning,
    FitLoss,
    ScalingFit,
    ScalingPoint,
    Term,
    Terms,
)

LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]


def model(q: float, lin: float, f: float, length: int, batch: int = 1) -> float:
    return q * batch * length * length + lin * batch * length + f


@settings(max_examples=60)
@given(
    st.floats(0.05, 0.9),
    st.floats(0.05, 0.9),
    st.floats(0.0005, 0.005),
    st.integers(0, 2**32 - 1),
    st.integers(4, 6),
)
def test_coefficients_recovered_within_their_errors(
    quad_share: float, lin_share: float, noise: float, seed: int, n_lengths: int
) -> None:
    # Terms drawn by their shares at 4096 tokens (each at least 5 %), one second total.
    fixed_share = max(1.0 - quad_share - lin_share, 0.05)
    q, lin, f = quad_share / 4096**2, lin_share / 4096, fixed_share
    rng = np.random.default_rng(seed)
    lengths = LENGTHS[:n_lengths] if n_lengths < 6 else LENGTHS
    points = [
        ScalingPoint(x, model(q, lin, f, x) * (1.0 + noise * float(rng.standard_normal())))
        for x in lengths
        for _ in range(4)
    ]
    fit = ScalingFit.fit(points)
    assert fit.dof == len(lengths) - 3
    for est, true, err in zip(fit.coefficients, (q, lin, f), fit.stderr, strict=True):
        assert math.isfinite(err)
        assert err > 0.0
        assert abs(est - true) <= 6.0 * err + 1e-12 * true
    assert fit.max_relative_residual < 6.0 * noise


@given(
    st.lists(
        st.tuples(st.sampled_from([100, 2000]), st.floats(1e-4, 10.0), st.integers(1, 8)),
        min_size=0,
        max_size=20,
    )
)
def test_fewer_than_three_lengths_always_rejected(raw: list[tuple[int, float, int]]) -> None:
    points = [ScalingPoint(length, seconds, batch) for length, seconds, batch in raw]
    with pytest.raises(InsufficientPointsError, match="at least three distinct lengths") as caught:
        ScalingFit.fit(points)
    assert f"got {len({p.length for p in points})}" in str(caught.value)


@given(st.lists(st.integers(1, 100_000), min_size=3, max_size=3, unique=True), st.floats(0.01, 5.0))
def test_three_lengths_are_exactly_determined(lengths: list[int], scale: float) -> None:
    points = [ScalingPoint(x, model(1e-9, 1e-5, 0.01, x) * scale) for x in lengths]
    fit = ScalingFit.fit(points)
    assert fit.dof == 0
    assert fit.exactly_determined
    assert all(math.isnan(e) for e in fit.stderr)
    assert math.isnan(fit.loo_max_error)
    assert fit.max_relative_residual < 1e-6  # interpolates: the true terms are all >= 0


def test_three_lengths_with_repeats_are_still_exactly_determined() -> None:
    points = [
        ScalingPoint(x, model(1e-9, 1e-5, 0.01, x) * m)
        for x in (512, 1024, 2048)
        for m in (0.99, 1.01)
    ]
    fit = ScalingFit.fit(points)
    assert fit.dof == 0
    assert fit.n_points == 6
    assert fit.n_lengths == 3
    assert math.isnan(fit.stderr.quadratic)


def test_robust_loss_keeps_a_term_one_outlier_zeroes() -> None:
    q, lin, f = 2e-8, 1e-5, 0.05
    points = [ScalingPoint(x, model(q, lin, f, x)) for x in LENGTHS for _ in range(2)]
    points[0] = ScalingPoint(512, points[0].seconds * 3.0)  # a first call at a new shape
    plain = ScalingFit.fit(points)
    robust = ScalingFit.fit(points, loss="soft_l1")
    assert plain.at_bound == (Term.LINEAR,)
    assert plain.linear == 0.0
    assert robust.at_bound == ()
    assert robust.loss is FitLoss.SOFT_L1
    for est, true in zip(robust.coefficients, (q, lin, f), strict=True):
        assert est == pytest.approx(true, rel=0.15)


def test_pinned_term_reported() -> None:
    # Pure quadratic + fixed: the linear term sits at its bound.
    points = [ScalingPoint(x, model(1e-8, 0.0, 0.02, x)) for x in LENGTHS]
    fit = ScalingFit.fit(points)
    assert Term.LINEAR in fit.at_bound
    assert fit.quadratic == pytest.approx(1e-8, rel=1e-6)
    assert fit.fixed == pytest.approx(0.02, rel=1e-6)


def test_batch_scales_the_length_terms() -> None:
    points = [
        ScalingPoint(x, model(1e-9, 1e-5, 0.03, x, b), b) for x in (512, 2048) for b in (1, 2, 4)
    ]
    points.append(ScalingPoint(8192, model(1e-9, 1e-5, 0.03, 8192, 1), 1))
    fit = ScalingFit.fit(points)
    assert fit.predict(2048, batch=4) == pytest.approx(model(1e-9, 1e-5, 0.03, 2048, 4), rel=1e-6)
    assert fit.dof == 7 - 3


def test_predict_shares_and_extrapolation() -> None:
    points = [ScalingPoint(x, model(2e-8, 1e-4, 0.05, x)) for x in LENGTHS]
    fit = ScalingFit.fit(points)
    shares = fit.shares(16384)
    assert isinstance(shares, Terms)
    assert sum(shares) == pytest.approx(1.0)
    quadratic, linear, fixed = shares
    assert quadratic > linear > fixed
    assert shares.of(Term.FIXED) == fixed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit.predict(4096)
    with pytest.warns(ExtrapolationWarning, match="outside the fitted range 512..16384"):
        fit.predict(32768)
    assert fit.extrapolates(100)
    assert not fit.extrapolates(512)
    with pytest.raises(InvalidInputError):
        fit.predict(0)


def test_leave_one_length_out_catches_a_wrong_shape() -> None:
    good = ScalingFit.fit([ScalingPoint(x, model(2e-8, 1e-4, 0.05, x)) for x in LENGTHS])
    assert good.loo_max_error < 1e-6
    # A cubic step time is not this model: leaving a length out shows it.
    cubic = ScalingFit.fit([ScalingPoint(x, 1e-12 * x**3 + 0.01) for x in LENGTHS])
    assert cubic.loo_max_error > 0.1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 0, "seconds": 1.0}, "length"),
        ({"length": 5, "seconds": 0.0}, "seconds"),
        ({"length": 5, "seconds": -1.0}, "seconds"),
        ({"length": 5, "seconds": math.nan}, "seconds"),
        ({"length": 5, "seconds": math.inf}, "seconds"),
        ({"length": 5, "seconds": 1.0, "batch": 0}, "batch"),
        ({"length": 5.5, "seconds": 1.0}, "int"),
        ({"length": True, "seconds": 1.0}, "int"),
        ({"length": 5, "seconds": "fast"}, "number"),
    ],
)
def test_bad_points_rejected(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        ScalingPoint(**kwargs)  # type: ignore[arg-type]


def test_bad_fit_arguments() -> None:
    points = [ScalingPoint(x, 1.0 + x / 1000) for x in (1, 2, 3)]
    with pytest.raises(InvalidInputError, match="unknown loss"):
        ScalingFit.fit(points, loss="huber")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="f_scale"):
        ScalingFit.fit(points, f_scale=0.0)
    with pytest.raises(InvalidInputError, match="not a ScalingPoint"):
        ScalingFit.fit([*points, (4, 1.0)])  # type: ignore[list-item]


def test_positional_contract_and_json() -> None:
    point = ScalingPoint(512, 0.11)
    assert (point.length, point.seconds, point.batch) == (512, 0.11, 1)
    fit = ScalingFit.fit(
        [ScalingPoint(512, 0.11), ScalingPoint(1024, 0.25), ScalingPoint(2048, 0.61)]
    )
    document = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    assert document["dof"] == 0
    assert document["exactly_determined"] is True
    assert document["stderr"] == {"quadratic": None, "linear": None, "fixed": None}


# ---------------------------------------------------------------------------------------
# Bounds (issue 19): typed errors, never a float overflow from scipy


def test_point_lengths_and_batches_are_bounded() -> None:
    assert ScalingPoint(2**40, 1.0, 2**40).length == 2**40
    with pytest.raises(InvalidInputError, match=r"length must be at most 2\*\*40"):
        ScalingPoint(2**40 + 1, 1.0)
    with pytest.raises(InvalidInputError, match=r"batch must be at most 2\*\*40"):
        ScalingPoint(5, 1.0, 10**400)
    with pytest.raises(InvalidInputError, match="seconds must be a number"):
        ScalingPoint(5, 10**400)


def test_seconds_too_small_for_floats_is_invalid_input() -> None:
    points = [ScalingPoint(1, 5e-324), ScalingPoint(2, 1.0), ScalingPoint(3, 2.0)]
    with pytest.raises(InvalidInputError, match="point 0: 5e-324 seconds is too small"):
        ScalingFit.fit(points)


def test_terms_beyond_the_bound_are_refused() -> None:
    fit = ScalingFit.fit([ScalingPoint(n, 0.001 * n) for n in (256, 512, 1024, 2048)])
    with pytest.raises(InvalidInputError, match=r"at most 2\*\*40"):
        fit.terms(10**48)
