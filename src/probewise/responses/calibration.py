"""The rubric's measured error, inside the estimate.

A rubric that misses some declines (or calls some answers declines) counts a biased
declined rate. Label a sample of outcomes by hand, build a :class:`Calibration` from
the ``(Outcome, HumanLabel)`` pairs, and :meth:`Calibration.correct` turns an arm's
tally into the declined rate corrected for the measured error, with an interval that
carries the uncertainty of both the arm and the labelled sample. The model, the
interval, the mix and chance rules are specified in docs/reference/calibration.md.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, cast, final

import attrs

from probewise import _json
from probewise._validation import count as _count
from probewise._validation import two_sided_z
from probewise.errors import (
    ArgumentTypeError,
    ArgumentTypeValueError,
    CalibrationError,
    InvalidInputError,
)
from probewise.responses._corrected import (
    CorrectedComparison,
    CorrectedRate,
    CorrectionMethod,
    ThreeWayRates,
)
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Outcome, Refused
from probewise.responses.stats import ArmTally, Proportion

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# CorrectedComparison, CorrectedRate, CorrectionMethod and ThreeWayRates, what a
# Calibration builds, are defined beneath it (_corrected) and named here too.
__all__ = [
    "Calibration",
    "CorrectedComparison",
    "CorrectedRate",
    "CorrectionMethod",
    "HumanLabel",
    "RubricBucket",
    "ThreeWayRates",
]


class HumanLabel(enum.Enum):
    """What a human labeller said a completion was."""

    COMPLIED = "complied"
    """The model did what was asked."""
    DECLINED = "declined"
    """The model declined (refused or deflected), for labellers who did not split declines."""
    REFUSED = "refused"
    """The model refused outright (a decline)."""
    DEFLECTED = "deflected"
    """The model declined by redirecting, moralising or asking instead (a decline)."""

    @property
    def declined(self) -> bool:
        """Every label but COMPLIED is a decline."""
        return self is not HumanLabel.COMPLIED


RubricBucket: TypeAlias = type[Complied] | type[Refused] | type[Deflected]
"""The outcome classes a calibration counts (the answers)."""

_ROWS: tuple[RubricBucket, ...] = (Complied, Refused, Deflected)
_ROW_NAMES = ("complied", "refused", "deflected")
_LABELS: tuple[HumanLabel, ...] = tuple(HumanLabel)
_ZEROS = tuple((0,) * len(_LABELS) for _ in _ROWS)
_SPLIT = (HumanLabel.COMPLIED, HumanLabel.REFUSED, HumanLabel.DEFLECTED)
_DRAWS = 4000


MAX_COUNT = 2**53
"""The most a labelled count may be: every count is exact as a float below it."""
MAX_EXACT_TEST = 2**31 - 1
"""The most an arm's count may be for :meth:`Calibration.compare`'s exact test, which
computes in 64-bit integers (past it its p-value overflows, or the test does not end)."""


def _z(confidence: float) -> float:
    return two_sided_z(confidence, name="confidence")


def _matrix_validator(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[tuple[object, ...], ...]
) -> None:
    if len(value) != len(_ROWS):
        raise InvalidInputError(f"{attribute.name} must have {len(_ROWS)} rows, got {len(value)}")
    for row in value:
        if len(row) != len(_LABELS):
            raise InvalidInputError(f"{attribute.name} rows must hold {len(_LABELS)} counts")
        for count in row:
            if not isinstance(count, int) or isinstance(count, bool):
                raise ArgumentTypeValueError(
                    f"{attribute.name} counts must be ints >= 0, got {type(count).__name__}"
                )
            if count < 0:
                raise InvalidInputError(f"{attribute.name} counts must be ints >= 0, got {count}")
            if count > MAX_COUNT:
                raise InvalidInputError(f"{attribute.name} counts must be at most 2**53")


def _to_matrix(value: Iterable[Iterable[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(row) for row in value)


def _dump_matrix(value: object) -> _json.JsonValue:
    """``matrix`` as ``{rubric bucket: {human label: count}}``."""
    rows = cast("tuple[tuple[int, ...], ...]", value)
    return {
        name: {label.value: count for label, count in zip(_LABELS, row, strict=True)}
        for name, row in zip(_ROW_NAMES, rows, strict=True)
    }


def _load_matrix(value: _json.JsonValue) -> list[list[int]]:
    """The inverse of :func:`_dump_matrix`; a bucket or label left out counts 0."""
    rows: list[list[int]] = [[0] * len(_LABELS) for _ in _ROWS]
    if not isinstance(value, Mapping):
        raise InvalidInputError("Calibration.matrix must be a mapping")
    for name, row in value.items():
        if name not in _ROW_NAMES:
            raise InvalidInputError(
                f"unknown rubric bucket {name!r} in Calibration.matrix; expected {list(_ROW_NAMES)}"
            )
        if not isinstance(row, Mapping):
            raise InvalidInputError(f"Calibration.matrix.{name} must be a mapping")
        for label, count in row.items():
            try:
                j = _LABELS.index(HumanLabel(label))
            except ValueError:
                raise InvalidInputError(
                    f"unknown human label {label!r} in Calibration.matrix.{name}"
                ) from None
            rows[_ROW_NAMES.index(name)][j] = _int_count(count, f"matrix.{name}.{label}")
    return rows


@_json.shaped(_json.Shape(codecs={"matrix": _json.Codec(dump=_dump_matrix, load=_load_matrix)}))
@final
@attrs.frozen(kw_only=True)
class Calibration:
    """The rubric's confusion matrix against human labels, on a labelled sample.

    ``matrix[i][j]`` counts outcomes the rubric put in bucket ``i`` (Complied, Refused,
    Deflected, in that order) that a human labelled ``j`` (in :class:`HumanLabel`
    order); read it with :meth:`count`. ``empty`` and ``error`` count the pairs whose
    outcome was Empty or Error, left out of every figure. ``a + b`` merges two
    samples (``Calibration()`` is the identity).
    """

    matrix: tuple[tuple[int, ...], ...] = attrs.field(
        default=_ZEROS, converter=_to_matrix, validator=_matrix_validator
    )
    empty: int = attrs.field(default=0, validator=_count)
    error: int = attrs.field(default=0, validator=_count)

    @classmethod
    def of(cls, pairs: Iterable[tuple[Outcome, HumanLabel]]) -> Calibration:
        """Count ``(outcome, human label)`` pairs (consumed once).

        Anything but an Outcome and a HumanLabel raises TypeError, naming the index.
        """
        counts = [[0] * len(_LABELS) for _ in _ROWS]
        empty = error = 0
        for index, pair in enumerate(pairs):
            if not isinstance(cast("object", pair), tuple) or len(pair) != 2:
                raise ArgumentTypeError(f"pair {index} must be a tuple (outcome, HumanLabel)")
            outcome, label = pair
            if not isinstance(label, HumanLabel):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise ArgumentTypeError(
                    f"pair {index}: the label must be a HumanLabel, got {type(label).__name__}"
                )
            match outcome:
                case Complied():
                    row = 0
                case Refused():
                    row = 1
                case Deflected():
                    row = 2
                case Empty():
                    empty += 1
                    continue
                case Error():
                    error += 1
                    continue
                case _:
                    raise ArgumentTypeError(  # pyright: ignore[reportUnreachable]
                        f"pair {index}: the outcome must be an Outcome, "
                        f"got {type(outcome).__name__}"
                    )
            counts[row][_LABELS.index(label)] += 1
        return cls(matrix=counts, empty=empty, error=error)

    def __add__(self, other: Calibration) -> Calibration:
        if not isinstance(other, Calibration):  # pyright: ignore[reportUnnecessaryIsInstance]
            return NotImplemented
        return Calibration(
            matrix=[
                [x + y for x, y in zip(row_a, row_b, strict=True)]
                for row_a, row_b in zip(self.matrix, other.matrix, strict=True)
            ],
            empty=self.empty + other.empty,
            error=self.error + other.error,
        )

    def count(self, bucket: RubricBucket, label: HumanLabel) -> int:
        """Outcomes the rubric put in ``bucket`` that a human labelled ``label``."""
        if bucket not in _ROWS:
            given = cast("object", bucket)
            shown = given.__name__ if isinstance(given, type) else type(given).__name__
            raise ArgumentTypeError(f"not an answer's outcome class: {shown}")
        return self.matrix[_ROWS.index(bucket)][_LABELS.index(label)]

    def _column(self, label: HumanLabel) -> int:
        j = _LABELS.index(label)
        return sum(row[j] for row in self.matrix)

    def _cells(self, buckets: Iterable[RubricBucket], labels: Iterable[HumanLabel]) -> int:
        labels = tuple(labels)
        return sum(self.count(b, lab) for b in buckets for lab in labels)

    @property
    def labelled(self) -> int:
        """Pairs in the matrix (answers with a human label)."""
        return sum(map(sum, self.matrix))

    @property
    def excluded(self) -> int:
        """Pairs left out: Empty + Error outcomes."""
        return self.empty + self.error

    @property
    def n(self) -> int:
        """Every pair counted."""
        return self.labelled + self.excluded

    @property
    def has_split(self) -> bool:
        """Whether the labels split declines: no DECLINED label, and some REFUSED or
        DEFLECTED ones."""
        return self._column(HumanLabel.DECLINED) == 0 and (
            self._column(HumanLabel.REFUSED) + self._column(HumanLabel.DEFLECTED) > 0
        )

    def recall(
        self, label: HumanLabel = HumanLabel.DECLINED, *, confidence: float = 0.95
    ) -> Proportion:
        """The share of rows a human labelled ``label`` that the rubric put there too.

        DECLINED is the binary view (Refused or Deflected among every decline label:
        the sensitivity); COMPLIED is the specificity of that view; REFUSED and
        DEFLECTED need the bucket itself (rows labelled DECLINED do not count).
        """
        hit: tuple[RubricBucket, ...]
        labels: tuple[HumanLabel, ...]
        match label:
            case HumanLabel.COMPLIED:
                hit, labels = (Complied,), (HumanLabel.COMPLIED,)
            case HumanLabel.DECLINED:
                hit, labels = (Refused, Deflected), tuple(lab for lab in _LABELS if lab.declined)
            case HumanLabel.REFUSED:
                hit, labels = (Refused,), (HumanLabel.REFUSED,)
            case HumanLabel.DEFLECTED:
                hit, labels = (Deflected,), (HumanLabel.DEFLECTED,)
        trials = sum(self._column(lab) for lab in labels)
        return Proportion.wilson(self._cells(hit, labels), trials, confidence=confidence)

    def specificity(
        self, label: HumanLabel = HumanLabel.DECLINED, *, confidence: float = 0.95
    ) -> Proportion:
        """The share of rows a human did not label ``label`` that the rubric kept out of it.

        DECLINED (the default) is the binary view: Complied among rows labelled
        COMPLIED. For REFUSED and DEFLECTED the rows labelled DECLINED are left out
        (whether they belong to the class is unknown).
        """
        match label:
            case HumanLabel.DECLINED:
                return self.recall(HumanLabel.COMPLIED, confidence=confidence)
            case HumanLabel.COMPLIED:
                return self.recall(HumanLabel.DECLINED, confidence=confidence)
            case HumanLabel.REFUSED | HumanLabel.DEFLECTED:
                bucket: RubricBucket = Refused if label is HumanLabel.REFUSED else Deflected
                others = tuple(lab for lab in _LABELS if lab not in (label, HumanLabel.DECLINED))
                kept = tuple(b for b in _ROWS if b is not bucket)
                trials = sum(self._column(lab) for lab in others)
                return Proportion.wilson(self._cells(kept, others), trials, confidence=confidence)

    @property
    def youden(self) -> float:
        """Youden's J = sensitivity + specificity - 1 of the binary view (NaN without
        rows of both classes). 0 is chance; 1 is a perfect rubric."""
        se, sp = self.recall(HumanLabel.DECLINED), self.specificity()
        if se.trials == 0 or sp.trials == 0:
            return math.nan
        return se.estimate + sp.estimate - 1.0

    def _usable(self, confidence: float) -> tuple[Proportion, Proportion]:
        se = self.recall(HumanLabel.DECLINED, confidence=confidence)
        sp = self.specificity(confidence=confidence)
        if se.trials == 0:
            raise CalibrationError(
                "the calibration has no answer labelled DECLINED, REFUSED or DEFLECTED: "
                "the rubric's sensitivity is unmeasured; label some declines"
            )
        if sp.trials == 0:
            raise CalibrationError(
                "the calibration has no answer labelled COMPLIED: the rubric's "
                "specificity is unmeasured; label some answers"
            )
        j = se.estimate + sp.estimate - 1.0
        # Newcombe's hybrid score interval for Se - (1 - Sp), two independent samples.
        j_low = j - math.hypot(se.estimate - se.low, sp.estimate - sp.low)
        j_high = j + math.hypot(se.high - se.estimate, sp.high - sp.estimate)
        if j_low <= 0.0:
            raise CalibrationError(
                f"the rubric is not distinguishable from chance on the calibration: "
                f"Youden's J = {j:.3f} [{j_low:.3f}, {j_high:.3f}] at {confidence:g} "
                f"(sensitivity {se.successes}/{se.trials}, specificity "
                f"{sp.successes}/{sp.trials}); label more rows or fix the rubric"
            )
        return se, sp

    def correct(self, tally: ArmTally, *, confidence: float = 0.95) -> CorrectedRate:
        """The arm's declined rate among answered outcomes, corrected for the measured
        error (see the module's notes for the method and its measured coverage).

        Raises :class:`~probewise.CalibrationError` when the calibration lacks a class
        or the rubric is not distinguishable from chance on it (Youden's J interval
        reaches 0), and :class:`~probewise.InvalidInputError` for a confidence outside
        (0, 1).
        """
        if not isinstance(tally, ArmTally):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeError(f"correct takes an ArmTally, got {type(tally).__name__}")
        z = _z(confidence)
        se, sp = self._usable(confidence)
        declined = tally.refused + tally.deflected
        observed = Proportion.wilson(declined, tally.answered, confidence=confidence)

        def rate(
            estimate: float,
            low: float,
            high: float,
            *,
            clipped: bool = False,
            three_way: ThreeWayRates | None = None,
        ) -> CorrectedRate:
            return CorrectedRate(
                observed=observed,
                estimate=estimate,
                low=low,
                high=high,
                clipped=clipped,
                sensitivity=se,
                specificity=sp,
                confidence=confidence,
                method=CorrectionMethod.LANG_REICZIGEL,
                empty=tally.empty,
                error=tally.error,
                three_way=three_way,
            )

        if tally.answered == 0:
            return rate(math.nan, 0.0, 1.0)
        raw, low, high = _lang_reiczigel(declined, tally.answered, se, sp, z)
        estimate = min(1.0, max(0.0, raw))
        return rate(
            estimate,
            min(low, estimate),
            max(high, estimate),
            clipped=estimate != raw,
            three_way=self._three_way(tally, confidence),
        )

    def _three_way(self, tally: ArmTally, confidence: float) -> ThreeWayRates | None:
        if not self.has_split:
            return None
        import numpy as np

        columns = [_LABELS.index(lab) for lab in _SPLIT]
        counts = np.array(self.matrix, dtype=np.float64)[:, columns]  # bucket x label
        if np.any(counts.sum(axis=0) == 0):
            return None
        arm = np.array([tally.complied, tally.refused, tally.deflected], dtype=np.float64)
        point = _invert((counts / counts.sum(axis=0))[None], (arm / arm.sum())[None])
        if point is None:
            return None
        shares, clipped = point[0][0], point[1][0]
        rng = np.random.default_rng(0)
        m = np.stack([rng.dirichlet(counts[:, j] + 0.5, _DRAWS) for j in range(3)], axis=2)
        q = rng.dirichlet(arm + 0.5, _DRAWS)
        drawn = _invert(m, q)
        tail = (1.0 - confidence) / 2.0
        if drawn is None:
            low, high = np.zeros(3), np.ones(3)
        else:
            low, high = np.quantile(drawn[0], [tail, 1.0 - tail], axis=0)
        bounds = [
            (min(float(lo), float(x)), max(float(hi), float(x)))
            for lo, x, hi in zip(low, shares, high, strict=True)
        ]
        return ThreeWayRates(
            complied=float(shares[0]),
            refused=float(shares[1]),
            deflected=float(shares[2]),
            complied_low=bounds[0][0],
            complied_high=bounds[0][1],
            refused_low=bounds[1][0],
            refused_high=bounds[1][1],
            deflected_low=bounds[2][0],
            deflected_high=bounds[2][1],
            clipped=bool(np.any(clipped)),
        )

    def compare(self, a: ArmTally, b: ArmTally, *, confidence: float = 0.95) -> CorrectedComparison:
        """Both arms' corrected declined rates and their difference ``a - b``."""
        z = _z(confidence)
        rate_a = self.correct(a, confidence=confidence)
        rate_b = self.correct(b, confidence=confidence)
        if not a.answered or not b.answered:
            return CorrectedComparison(
                a=rate_a, b=rate_b, difference=math.nan, low=-1.0, high=1.0,
                p_value=math.nan, confidence=confidence,
            )  # fmt: skip
        import numpy as np
        from scipy.stats import fisher_exact

        x_a, x_b = a.refused + a.deflected, b.refused + b.deflected
        if max(a.answered, b.answered) > MAX_EXACT_TEST:
            raise InvalidInputError(
                "Calibration.compare: an arm's answered count is past 2**31 - 1, where "
                "Fisher's exact test overflows; compare samples of the arms"
            )
        table = np.array([[x_a, a.complied], [x_b, b.complied]], dtype=np.int64)
        p_value = min(1.0, float(fisher_exact(table, alternative="two-sided").pvalue))
        difference = rate_a.estimate - rate_b.estimate
        # Agresti-Caffo: one pseudo-success and one pseudo-failure per arm.
        pa, na = (x_a + 1) / (a.answered + 2), a.answered + 2
        pb, nb = (x_b + 1) / (b.answered + 2), b.answered + 2
        se1, ns, sp1, nsp = _adjusted(rate_a.sensitivity, rate_a.specificity)
        j = se1 + sp1 - 1.0
        d = (pa - pb) / j
        var = (
            pa * (1 - pa) / na
            + pb * (1 - pb) / nb
            + d * d * (se1 * (1 - se1) / ns + sp1 * (1 - sp1) / nsp)
        ) / (j * j)
        half = z * math.sqrt(var)
        low = max(-1.0, min(d - half, difference))
        high = min(1.0, max(d + half, difference))
        return CorrectedComparison(
            a=rate_a, b=rate_b, difference=difference, low=low, high=high,
            p_value=p_value, confidence=confidence,
        )  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        """The counts, JSON-ready: ``matrix`` maps rubric bucket to human label to count."""
        return _json.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Calibration:
        """Inverse of :meth:`to_dict`; unknown keys or non-int counts raise
        :class:`~probewise.InvalidInputError`."""
        expected = [field.name for field in attrs.fields(cls)]
        unknown = sorted(set(data) - set(expected))
        if unknown:  # the message this method has always given (not _json's list form)
            raise InvalidInputError(
                f"unknown Calibration fields {unknown}; expected {', '.join(expected)}"
            )
        counts = {key: _int_count(data[key], key) for key in ("empty", "error") if key in data}
        return _json.structure({**data, **counts}, cls)


def _int_count(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        # a value: what a Calibration document holds (from_dict), not an argument's type
        raise InvalidInputError(
            f"Calibration.{where} must be an int >= 0, got {type(value).__name__}"
        )
    if value < 0:
        raise InvalidInputError(f"Calibration.{where} must be an int >= 0, got {value}")
    if value > MAX_COUNT:  # a count past float range would fail only after a whole run
        raise InvalidInputError(f"Calibration.{where} must be at most 2**53")
    return value


def _adjusted(se: Proportion, sp: Proportion) -> tuple[float, int, float, int]:
    """Sensitivity and specificity with one pseudo-success out of two each."""
    ns, nsp = se.trials + 2, sp.trials + 2
    return (se.successes + 1) / ns, ns, (sp.successes + 1) / nsp, nsp


def _lang_reiczigel(
    x: int, n: int, se: Proportion, sp: Proportion, z: float
) -> tuple[float, float, float]:
    """(raw Rogan-Gladen estimate, low, high): Lang & Reiczigel's adjusted limits."""
    raw = (x / n + sp.estimate - 1.0) / (se.estimate + sp.estimate - 1.0)
    n1 = n + z * z
    p1 = (x + z * z / 2.0) / n1
    se1, ns, sp1, nsp = _adjusted(se, sp)
    j = se1 + sp1 - 1.0
    if j <= 0.0:  # only for tiny samples; _usable's check is almost always stricter
        raise CalibrationError(
            f"the rubric is not distinguishable from chance on the calibration "
            f"(adjusted Youden's J = {j:.3f}); label more rows or fix the rubric"
        )
    pi1 = (p1 + sp1 - 1.0) / j
    var_se, var_sp = se1 * (1 - se1) / ns, sp1 * (1 - sp1) / nsp
    sd = math.sqrt(p1 * (1 - p1) / n1 + pi1 * pi1 * var_se + (1 - pi1) ** 2 * var_sp) / j
    shift = 2.0 * z * z * (pi1 * var_se - (1 - pi1) * var_sp)
    low = min(1.0, max(0.0, pi1 + shift - z * sd))
    high = min(1.0, max(0.0, pi1 + shift + z * sd))
    return raw, low, high


def _invert(
    m: npt.NDArray[np.float64], q: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]] | None:
    """Solve ``m @ x = q`` (one system, or a stack of them), clip negative shares to 0
    and renormalise; with which solutions were clipped. Systems whose matrix is
    (near-)singular, or whose clipped solution has nothing left, are dropped; ``None``
    when none is left."""
    import numpy as np

    usable = np.abs(np.linalg.det(m)) >= 1e-9
    if not np.any(usable):
        return None
    m, q = m[usable], q[usable]
    x = np.linalg.solve(m, q[..., None])[..., 0]
    clipped = np.any(x < 0.0, axis=-1)
    x = np.clip(x, 0.0, None)
    total = x.sum(axis=-1)
    kept = total > 0.0
    if not np.any(kept):
        return None
    return np.clip(x[kept] / total[kept, None], 0.0, 1.0), clipped[kept]
