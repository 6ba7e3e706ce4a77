"""Running arms: prompts through the caller's generator, tallied, text never kept.

Each completion lives for one :func:`~probewise.classify` call: it is classified as
soon as the generator returns it, and only the :data:`~probewise.Outcome` (which
holds no text) is kept. A generator that raises gives ``Error(kind=GENERATION)``
for that prompt and the run goes on; the exception itself is dropped, since its
message may quote what the model said.

Prompts come keyed by the caller's ids (``Mapping[id, prompt]``): results name
prompts by those ids only, never by prompt or completion text.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Hashable, Mapping
from typing import TypeAlias, TypeVar, final

import attrs

from probewise.responses.classify import Completion, classify
from probewise.responses.control import ControlVerdict, compare_arms
from probewise.responses.outcome import Complied, Deflected, Empty, Error, Outcome, Refused
from probewise.responses.rubric import Rubric
from probewise.responses.sealed import Sealed
from probewise.responses.tally import ArmTally

__all__ = [
    "Generate",
    "McNemar",
    "OutcomeBucket",
    "OutcomePair",
    "PairedResult",
    "run_arm",
    "run_paired",
]

P = TypeVar("P")
K = TypeVar("K", bound=Hashable)

Generate: TypeAlias = Callable[[P], Completion | Sealed | str]
"""The caller's generator: a prompt in, a completion out (or an exception)."""


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


class _Progress:
    """Counts on stderr, on a terminal only; never a prompt or a completion."""

    def __init__(self, total: int, label: str, *, enabled: bool | None) -> None:
        self.total = total
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.tally = ArmTally()

    def update(self, tally: ArmTally) -> None:
        self.tally = tally
        if self.enabled:
            t = tally
            sys.stderr.write(
                f"\r{self.label}: {t.n}/{self.total}  complied {t.complied}  deflected "
                f"{t.deflected}  refused {t.refused}  empty {t.empty}  error {t.error}"
            )
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _one(
    prompt: P,
    generate: Generate[P],
    rubric: Rubric | None,
    axis: Hashable | None,
) -> Outcome:
    try:
        completion = generate(prompt)
    except Exception as error:  # the generator's failure is this prompt's Error outcome
        outcome = classify(error)
        del error
        return outcome
    outcome = classify(completion, rubric, axis=axis)
    del completion
    return outcome


def _outcomes(
    prompts: Mapping[K, P],
    generate: Generate[P],
    rubric: Rubric | None,
    *,
    axis_of: Callable[[K], Hashable | None] | None,
    progress: bool | None,
    label: str,
) -> dict[K, Outcome]:
    bar = _Progress(len(prompts), label, enabled=progress)
    tally = ArmTally()
    outcomes: dict[K, Outcome] = {}
    try:
        for prompt_id, prompt in prompts.items():
            axis = None if axis_of is None else axis_of(prompt_id)
            outcome = _one(prompt, generate, rubric, axis)
            outcomes[prompt_id] = outcome
            tally = tally + ArmTally.of([outcome])
            bar.update(tally)
    finally:
        bar.close()
    return outcomes


def run_arm(
    prompts: Mapping[K, P],
    generate: Generate[P],
    rubric: Rubric | None = None,
    *,
    axis_of: Callable[[K], Hashable | None] | None = None,
    progress: bool | None = None,
) -> ArmTally:
    """Generate and classify every prompt; return the tally.

    Args:
        prompts: the caller's prompts keyed by the caller's ids.
        generate: called once per prompt; returns a :class:`Completion`, a
            :class:`Sealed` or a ``str``. An exception gives ``Error(GENERATION)``.
        rubric: the rules (``Rubric.default()`` when ``None``).
        axis_of: the axis of a prompt id, for axis-mapped rubrics (``None``: none).
        progress: show counts on stderr (default: only on a terminal).
    """
    outcomes = _outcomes(prompts, generate, rubric, axis_of=axis_of, progress=progress, label="arm")
    return ArmTally.of(outcomes.values())


@final
@attrs.frozen(kw_only=True)
class OutcomePair:
    """One prompt's outcomes in arm A and arm B, named by the caller's prompt id."""

    prompt_id: Hashable
    a: Outcome
    b: Outcome


def _p_value(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value}")


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


def _mcnemar(bucket: OutcomeBucket, only_a: int, only_b: int) -> McNemar:
    from scipy.stats import binomtest

    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)
    return McNemar(bucket=bucket, only_a=only_a, only_b=only_b, p_value=min(1.0, p))


@final
@attrs.frozen(kw_only=True)
class PairedResult:
    """Two arms over the same prompts: per-prompt pairs, tallies, control, paired tests."""

    pairs: tuple[OutcomePair, ...]
    tally_a: ArmTally
    tally_b: ArmTally
    control: ControlVerdict
    mcnemar: tuple[McNemar, ...]
    """One per :class:`OutcomeBucket`, in the enum's order."""

    def test(self, bucket: OutcomeBucket) -> McNemar:
        """The paired test for ``bucket``."""
        for result in self.mcnemar:
            if result.bucket is bucket:
                return result
        raise KeyError(bucket)


def run_paired(
    prompts: Mapping[K, P],
    generate_a: Generate[P],
    generate_b: Generate[P],
    rubric: Rubric | None = None,
    *,
    axis_of: Callable[[K], Hashable | None] | None = None,
    progress: bool | None = None,
) -> PairedResult:
    """Run both arms over the same prompts and compare them pair by pair.

    Arm A runs over every prompt, then arm B. The control verdict
    (:func:`~probewise.compare_arms`) reads the two tallies; the McNemar tests read
    the pairs, which is the right test when the same prompts went to both arms.
    """
    outcomes_a = _outcomes(
        prompts, generate_a, rubric, axis_of=axis_of, progress=progress, label="arm A"
    )
    outcomes_b = _outcomes(
        prompts, generate_b, rubric, axis_of=axis_of, progress=progress, label="arm B"
    )
    pairs = tuple(OutcomePair(prompt_id=k, a=outcomes_a[k], b=outcomes_b[k]) for k in prompts)
    tally_a = ArmTally.of(outcomes_a.values())
    tally_b = ArmTally.of(outcomes_b.values())
    tests: list[McNemar] = []
    for bucket in OutcomeBucket:
        only_a = sum(
            1
            for p in pairs
            if OutcomeBucket.of(p.a) is bucket and OutcomeBucket.of(p.b) is not bucket
        )
        only_b = sum(
            1
            for p in pairs
            if OutcomeBucket.of(p.b) is bucket and OutcomeBucket.of(p.a) is not bucket
        )
        tests.append(_mcnemar(bucket, only_a, only_b))
    return PairedResult(
        pairs=pairs,
        tally_a=tally_a,
        tally_b=tally_b,
        control=compare_arms(tally_a, tally_b),
        mcnemar=tuple(tests),
    )
