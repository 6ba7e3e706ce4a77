"""Step-time scaling: a three-term fit of seconds against sequence length.

The model is ``seconds = quadratic * batch * length**2 + linear * batch * length +
fixed``: attention-like work (quadratic in length), per-token work (MLPs, norms,
the loss), and a fixed cost per step (launches, the optimiser, data loading).
Every coefficient is bounded below by zero: a negative share of time is not a
thing a step can have.

Three terms need three distinct lengths. With two, any split between the terms
that passes through both points fits exactly, so the shares the fit reports would
be arbitrary: :class:`~probewise.errors.InsufficientPointsError`. With exactly
three the fit is exactly determined (``dof == 0``): it interpolates, and there is
no noise estimate and no standard error.

Residuals are *relative* (``(predicted - measured) / measured``), so a point at
16k tokens does not outweigh one at 512 by the square of their times; with
``loss="soft_l1"`` residuals beyond ``f_scale`` (5 % by default) are down-weighted,
so one outlier (a first call at a new shape, a GC pause) does not push a term to
zero. Columns are rescaled to unit size before solving, for conditioning.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Iterable
from typing import Literal, NamedTuple, TypeAlias, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise import _json
from probewise._validation import length_int
from probewise.errors import ArgumentTypeValueError, InsufficientPointsError, InvalidInputError

__all__ = [
    "ExtrapolationWarning",
    "FitLoss",
    "LossName",
    "ScalingFit",
    "ScalingPoint",
    "Term",
    "Terms",
]

FloatArray = npt.NDArray[np.float64]

LossName: TypeAlias = Literal["linear", "soft_l1"]
"""The names :meth:`ScalingFit.fit` accepts for its ``loss``."""


class ExtrapolationWarning(UserWarning):
    """A prediction at a length outside the range the fit was made on."""


@enum.unique
class FitLoss(enum.Enum):
    """The loss :meth:`ScalingFit.fit` minimises."""

    LINEAR = "linear"
    """Ordinary least squares on the relative residuals."""
    SOFT_L1 = "soft_l1"
    """Robust: residuals beyond ``f_scale`` count about linearly, not quadratically."""


@enum.unique
class Term(enum.Enum):
    """The three terms of the step-time model."""

    QUADRATIC = "quadratic"
    """``batch * length**2``: attention-like work."""
    LINEAR = "linear"
    """``batch * length``: per-token work."""
    FIXED = "fixed"
    """A fixed cost per step."""


class Terms(NamedTuple):
    """One value per term (coefficients, standard errors or shares).

    A named tuple, so it unpacks as ``quadratic, linear, fixed = fit.shares(4096)``
    as well as reading by name.
    """

    quadratic: float
    linear: float
    fixed: float

    def of(self, term: Term) -> float:
        """The value for ``term``."""
        match term:
            case Term.QUADRATIC:
                return self.quadratic
            case Term.LINEAR:
                return self.linear
            case Term.FIXED:
                return self.fixed


def _positive_seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise InvalidInputError(
            f"{attribute.name} must be finite and > 0, got {value!r} (a step takes some time)"
        )


def _to_float(value: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentTypeValueError(
            f"seconds must be a number, got a {type(value).__name__}"
        ) from None


@final
@attrs.frozen
class ScalingPoint:
    """One timed step: ``batch`` sequences of ``length`` tokens took ``seconds``.

    ``length`` and ``batch`` are ints from 1 to 2**40 (the bound on lengths
    everywhere in probewise); ``seconds`` is finite and positive.

    Positional as well as keyword (``ScalingPoint(512, 0.11)``), as the public
    contract writes it; the other value objects are keyword-only.
    """

    length: int = attrs.field(validator=length_int)
    seconds: float = attrs.field(converter=_to_float, validator=_positive_seconds)
    batch: int = attrs.field(default=1, validator=length_int)


def _design(lengths: FloatArray, batches: FloatArray) -> FloatArray:
    return np.column_stack([batches * lengths**2, batches * lengths, np.ones_like(lengths)])


@final
@attrs.frozen(kw_only=True, eq=False)
class _Solution:
    coef: FloatArray
    """The coefficients, in the design's units."""
    scaled: FloatArray
    """The Jacobian of the relative residuals, each column divided by ``scale``."""
    scale: FloatArray
    active: npt.NDArray[np.bool_]
    """The coefficients at their bound (zero)."""


def _r_squared(predicted: FloatArray, seconds: FloatArray) -> float:
    """R² of the fit; scale-free, so seconds near the float limit (whose squares overflow)
    are divided by the largest first. Ordinary inputs take the direct sums, unchanged."""
    with np.errstate(over="ignore"):
        total = float(((seconds - seconds.mean()) ** 2).sum())
        ssr = float(((predicted - seconds) ** 2).sum())
    if not (math.isfinite(total) and math.isfinite(ssr)):
        scale = float(np.abs(seconds).max())
        return _r_squared(predicted / scale, seconds / scale)
    return 1.0 - ssr / total if total > 0.0 else (1.0 if ssr == 0.0 else 0.0)


def _solve(design: FloatArray, seconds: FloatArray, loss: FitLoss, f_scale: float) -> _Solution:
    """Fit on relative residuals, in unit-scaled columns (L**2 and 1 differ by 1e8)."""
    from scipy.optimize import least_squares, nnls

    with np.errstate(over="ignore"):
        weighted: FloatArray = design / seconds[:, None]  # relative residuals: (X b - y) / y
    if not np.isfinite(weighted).all():
        row = int(np.argmin(np.isfinite(weighted).all(axis=1)))
        raise InvalidInputError(
            f"point {row}: {float(seconds[row])!r} seconds is too small for its length and "
            "batch to fit in floating point (batch * length**2 / seconds overflows)"
        )
    scale: FloatArray = np.abs(weighted).max(axis=0)
    scale[scale == 0.0] = 1.0
    scaled: FloatArray = weighted / scale
    target = np.ones_like(seconds)
    start, _ = nnls(scaled, target)
    if loss is FitLoss.LINEAR:
        solution = start
        active = solution <= 0.0
    else:

        def residuals(b: FloatArray) -> FloatArray:
            out: FloatArray = scaled @ b - target
            return out

        def jacobian(_b: FloatArray) -> FloatArray:
            return scaled

        result = least_squares(
            residuals,
            np.maximum(start, 1e-12),
            jac=jacobian,
            bounds=(0.0, np.inf),
            loss=loss.value,
            f_scale=f_scale,
            method="trf",
            x_scale="jac",
            xtol=1e-14,
            ftol=1e-14,
            gtol=1e-14,
        )
        solution = np.asarray(result.x, dtype=np.float64)
        active = (np.asarray(result.active_mask) != 0) | (
            solution <= 1e-12 * max(1.0, float(solution.max()))
        )
        solution = np.where(active, 0.0, solution)
    return _Solution(coef=solution / scale, scaled=scaled, scale=scale, active=active)


@_json.shaped(
    _json.Shape(after={"exactly_determined": "dof"}, nan_as_none={"stderr", "loo_max_error"})
)
@final
@attrs.frozen(kw_only=True)
class ScalingFit:
    """Seconds per step as ``quadratic * b * L**2 + linear * b * L + fixed``, fitted.

    ``stderr`` holds each coefficient's standard error from the Jacobian at the
    solution (``s**2 (J^T J)^-1`` on the relative residuals, ``s**2`` their mean
    square over ``n_points - 3``); NaN when ``dof == 0``. ``dof`` is the number of
    distinct (length, batch) settings minus three: repeated timings of one setting
    tell the noise, not the shape. ``at_bound`` names the terms pinned at zero.
    ``loo_max_error`` is the largest relative error predicting every point of a
    length left out of the fit (NaN with fewer than four lengths, where leaving one
    out leaves too few to fit). ``max_relative_residual`` is over all points.
    """

    quadratic: float
    linear: float
    fixed: float
    stderr: Terms
    n_points: int
    n_lengths: int
    dof: int
    r_squared: float
    max_relative_residual: float
    loo_max_error: float
    at_bound: tuple[Term, ...]
    length_min: int
    length_max: int
    loss: FitLoss
    f_scale: float

    def __attrs_post_init__(self) -> None:
        for name in ("quadratic", "linear", "fixed"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0.0):
                raise InvalidInputError(f"{name} must be finite and >= 0, got {value}")
        if self.n_lengths < 3:
            raise InsufficientPointsError(_too_few_message(self.n_lengths, ()))
        if self.dof < 0 or self.n_points < self.n_lengths:
            raise InvalidInputError("need dof >= 0 and n_points >= n_lengths")
        if self.length_min > self.length_max:
            raise InvalidInputError("length_min must be <= length_max")

    @property
    def coefficients(self) -> Terms:
        """The three coefficients (seconds per ``b*L**2``, per ``b*L``, per step)."""
        return Terms(self.quadratic, self.linear, self.fixed)

    @property
    def exactly_determined(self) -> bool:
        """Three settings for three terms: the fit interpolates; no noise estimate."""
        return self.dof == 0

    @classmethod
    def fit(
        cls,
        points: Iterable[ScalingPoint],
        *,
        loss: FitLoss | LossName = FitLoss.LINEAR,
        f_scale: float = 0.05,
    ) -> ScalingFit:
        """Fit the three-term model to timed points.

        Args:
            points: :class:`ScalingPoint` values at three or more distinct lengths
                (repeats at one length are welcome: they steady the fit).
            loss: ``"linear"`` (least squares) or ``"soft_l1"`` (robust to outliers).
            f_scale: for ``soft_l1``, the relative residual (0.05 = 5 %) beyond which
                a point's weight falls off.

        Raises:
            InsufficientPointsError: fewer than three distinct lengths.
            InvalidInputError: a point that is not a :class:`ScalingPoint`, an unknown
                loss, or a non-positive ``f_scale``.
        """
        chosen = _parse_loss(loss)
        if not (math.isfinite(f_scale) and f_scale > 0.0):
            raise InvalidInputError(f"f_scale must be finite and > 0, got {f_scale}")
        items = list(points)
        for i, p in enumerate(items):
            if not isinstance(p, ScalingPoint):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ArgumentTypeValueError(
                    f"point {i} is a {type(p).__name__}, not a ScalingPoint"
                )
        lengths = np.array([p.length for p in items], dtype=np.float64)
        distinct = sorted({p.length for p in items})
        if len(distinct) < 3:
            raise InsufficientPointsError(_too_few_message(len(distinct), distinct))
        batches = np.array([p.batch for p in items], dtype=np.float64)
        seconds = np.array([p.seconds for p in items], dtype=np.float64)
        design = _design(lengths, batches)
        solved = _solve(design, seconds, chosen, f_scale)
        coef, active = solved.coef, solved.active
        predicted = design @ coef
        relative = (predicted - seconds) / seconds
        settings = len({(p.length, p.batch) for p in items})
        dof = settings - 3
        stderr = _stderr(solved, relative, n_points=len(items), dof=dof)
        r_squared = _r_squared(predicted, seconds)
        return cls(
            quadratic=float(coef[0]),
            linear=float(coef[1]),
            fixed=float(coef[2]),
            stderr=stderr,
            n_points=len(items),
            n_lengths=len(distinct),
            dof=dof,
            r_squared=r_squared,
            max_relative_residual=float(np.abs(relative).max()),
            loo_max_error=_leave_one_length_out(items, distinct, chosen, f_scale),
            at_bound=tuple(t for t, pinned in zip(Term, active.tolist(), strict=True) if pinned),
            length_min=distinct[0],
            length_max=distinct[-1],
            loss=chosen,
            f_scale=f_scale,
        )

    def extrapolates(self, length: int) -> bool:
        """Whether ``length`` lies outside the lengths the fit was made on."""
        return not self.length_min <= length <= self.length_max

    def terms(self, length: int, batch: int = 1) -> Terms:
        """Each term's predicted seconds at ``length`` (and ``batch``)."""
        length_int(None, _LENGTH, length)
        length_int(None, _BATCH, batch)
        return Terms(
            self.quadratic * batch * length * length,
            self.linear * batch * length,
            self.fixed,
        )

    def predict(self, length: int, batch: int = 1) -> float:
        """Predicted seconds per step; warns (:class:`ExtrapolationWarning`) outside the range."""
        parts = self.terms(length, batch)
        if self.extrapolates(length):
            warnings.warn(
                f"length {length} is outside the fitted range {self.length_min}..{self.length_max}: "
                "an extrapolation",
                ExtrapolationWarning,
                stacklevel=2,
            )
        return parts.quadratic + parts.linear + parts.fixed

    def shares(self, length: int, batch: int = 1) -> Terms:
        """The three terms' fractions of the predicted time at ``length``."""
        parts = self.terms(length, batch)
        total = parts.quadratic + parts.linear + parts.fixed
        if total <= 0.0:
            raise InvalidInputError("every term is zero: no shares to give")
        return Terms(parts.quadratic / total, parts.linear / total, parts.fixed / total)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (NaN as None)."""
        return _json.to_dict(self)


_LENGTH = attrs.fields(ScalingPoint).length
_BATCH = attrs.fields(ScalingPoint).batch


def _parse_loss(loss: FitLoss | str) -> FitLoss:  # str: untyped callers get a clear error
    if isinstance(loss, FitLoss):
        return loss
    try:
        return FitLoss(loss)
    except ValueError:
        choices = ", ".join(m.value for m in FitLoss)
        raise InvalidInputError(f"unknown loss {loss!r}; choose one of {choices}") from None


def _too_few_message(count: int, distinct: Iterable[int]) -> str:
    shown = ", ".join(str(x) for x in distinct)
    given = f" ({shown})" if shown else ""
    return (
        f"a scaling fit needs at least three distinct lengths, got {count}{given}: the model "
        "has three terms (quadratic, linear, fixed), and through two lengths any split "
        "between them fits exactly, so the shares would be arbitrary. Time the step at "
        "one more length (four or more give a noise estimate)"
    )


def _stderr(solved: _Solution, relative: FloatArray, *, n_points: int, dof: int) -> Terms:
    if dof <= 0 or n_points <= 3:
        return Terms(math.nan, math.nan, math.nan)
    sigma2 = float((relative**2).sum()) / (n_points - 3)
    # In the unit-scaled columns the fit used, then back to the coefficients' units.
    scaled, scale = solved.scaled, solved.scale
    covariance: FloatArray = sigma2 * np.asarray(
        np.linalg.pinv(scaled.T @ scaled), dtype=np.float64
    )
    errors = np.sqrt(np.maximum(np.diag(covariance), 0.0)) / scale
    return Terms(float(errors[0]), float(errors[1]), float(errors[2]))


def _leave_one_length_out(
    items: list[ScalingPoint], distinct: list[int], loss: FitLoss, f_scale: float
) -> float:
    if len(distinct) < 4:
        return math.nan
    worst = 0.0
    for held in distinct:
        kept = [p for p in items if p.length != held]
        out = [p for p in items if p.length == held]
        lengths = np.array([p.length for p in kept], dtype=np.float64)
        batches = np.array([p.batch for p in kept], dtype=np.float64)
        seconds = np.array([p.seconds for p in kept], dtype=np.float64)
        coef = _solve(_design(lengths, batches), seconds, loss, f_scale).coef
        for p in out:
            predicted = coef[0] * p.batch * p.length**2 + coef[1] * p.batch * p.length + coef[2]
            worst = max(worst, abs(predicted - p.seconds) / p.seconds)
    return worst
