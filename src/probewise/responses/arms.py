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

import os
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Protocol, TypeVar, cast, final

import attrs

from probewise._progress import progress_bar
from probewise.errors import ArgumentTypeError, InputFileError, InvalidInputError
from probewise.responses import _boundary, _journal, _run_identity
from probewise.responses.classifier import classify
from probewise.responses.control import ControlVerdict, compare_arms
from probewise.responses.decide import StopWhenDecided
from probewise.responses.generators import BatchGenerate, Generate
from probewise.responses.judge import Judge, JudgeAgreement, JudgeVerdict, judge_completion
from probewise.responses.outcome import Empty, Error, ErrorKind, Outcome
from probewise.responses.rubric import Rubric
from probewise.responses.sealed import Completion, Sealed
from probewise.responses.stats import ArmTally, McNemar, OutcomeBucket, mcnemar

__all__ = ["OutcomePair", "PairedResult", "run_arm", "run_arm_shards", "run_paired"]

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)
K = TypeVar("K", bound=Hashable)


class _Progress:
    """A tqdm bar on stderr (on a terminal only, by default) showing counts, never text."""

    def __init__(self, total: int, label: str, *, enabled: bool | None) -> None:
        on = sys.stderr.isatty() if enabled is None else enabled
        self.bar = progress_bar(
            total=total, desc=label, unit="prompt", file=sys.stderr, disable=not on
        )
        self.seen = 0

    def update(self, tally: ArmTally) -> None:
        t = tally
        self.bar.set_postfix_str(
            f"complied {t.complied} deflected {t.deflected} refused {t.refused} "
            f"empty {t.empty} error {t.error}",
            refresh=False,
        )
        self.bar.update(t.n - self.seen)
        self.seen = t.n

    def close(self) -> None:
        self.bar.close()


def _batch_size(generate: object, batched: bool) -> int:
    if batched:
        size = cast("object", cast("BatchGenerate[object]", generate).batch_size)
        if isinstance(size, int) and size >= 1:
            return size
        shown = str(size) if isinstance(size, int) else f"a {type(size).__name__}"
        raise InvalidInputError(f"batch_size must be an int >= 1, got {shown}")
    return 1


def _failed(error: BaseException) -> Error:
    """The Error outcome of a generation that raised (or returned) ``error``; the
    exception's frames are cleared: its message and locals may hold the text."""
    _boundary.drop(error)
    return Error(kind=ErrorKind.GENERATION, exception_type=type(error))


def _sealed(result: object) -> Completion | Sealed | Error:
    """A generator's result with its text sealed at once (or its Error outcome), so
    that no frame of the run holds the text itself."""
    if isinstance(result, Completion | Sealed):
        return result
    if isinstance(result, str):
        return Sealed(result)
    if isinstance(result, BaseException):
        return _failed(result)
    return Error(kind=ErrorKind.INVALID_INPUT)


def _generate_chunk(
    prompts: list[P], generate: object, batched: bool, stops: list[StopWhenDecided] | None = None
) -> list[Completion | Sealed | Error]:
    """Each prompt's sealed completion, or the Error outcome of its generation.

    An ``Exception`` from the generator is that prompt's (or, from
    ``generate_batch``, the batch's) ``Error(GENERATION)``. Any other
    ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) stops the run: it is
    dropped and a fresh one of its class, holding no text, is raised instead.
    """
    out: list[Completion | Sealed | Error] = []
    stop: BaseException | None = None
    if batched:
        batch = cast("BatchGenerate[P]", generate)
        try:
            results = cast(
                "object",
                batch.generate_batch(prompts)
                if stops is None
                else cast("_Stops[P]", batch).generate_batch(prompts, stop=stops),
            )
        except Exception as error:  # the whole batch failed: every prompt is an Error
            return [_failed(error)] * len(prompts)
        except BaseException as error:
            _boundary.drop(error)
            stop = _boundary.fresh(error)
            del error
        else:
            if not isinstance(results, Sequence) or isinstance(results, str):
                kind = type(results).__name__
                del results
                raise InvalidInputError(
                    f"generate_batch must return a sequence (a list) of results, got a {kind}"
                )
            items = cast("Sequence[object]", results)
            if len(items) != len(prompts):
                failure = InvalidInputError(
                    f"generate_batch returned {len(items)} results for {len(prompts)} prompts"
                )
                return [_failed(failure)] * len(prompts)
            return [_sealed(item) for item in items]
    else:
        single = cast("Generate[P]", generate)
        for prompt in prompts:
            try:
                out.append(_sealed(single(prompt)))
            except Exception as error:  # this prompt's Error outcome; the run goes on
                out.append(_failed(error))
            except BaseException as error:
                _boundary.drop(error)
                stop = _boundary.fresh(error)
                del error
                break
    if stop is not None:
        raise stop from None
    return out


class _Stops(Protocol[P_contra]):
    """A batch generator that can stop each reply once its outcome is decided."""

    def generate_batch(
        self, prompts: Sequence[P_contra], *, stop: Sequence[StopWhenDecided]
    ) -> Sequence[Completion | BaseException]: ...


def _stops(generate: object, batched: bool, judge: Judge | None, wanted: bool) -> bool:
    """Whether this run stops replies once decided: asked for, exact (no judge, which
    reads the whole reply), and the generator can."""
    if not isinstance(wanted, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeError(f"stop_when_decided must be a bool, got {type(wanted).__name__}")
    return (
        wanted
        and judge is None
        and batched
        and getattr(generate, "can_stop_when_decided", False) is True
    )


def _stop_list(
    ids: list[K], rubric: Rubric, axis_of: Callable[[K], Hashable | None] | None
) -> list[StopWhenDecided]:
    """Each prompt's decision point: the run's rubric and the prompt's axis."""
    return [
        StopWhenDecided(rubric=rubric, axis=None if axis_of is None else axis_of(k)) for k in ids
    ]


def _count_tokens(result: Completion | Sealed, usage: list[int] | None) -> None:
    """Adds a completion's token count (where its generator gave one) to ``usage``."""
    counted = result.tokens if isinstance(result, Completion) else None
    if usage is not None and counted is not None:
        usage[0] += counted
        usage[1] += 1


def _outcomes(
    prompts: Mapping[K, P],
    generate: Generate[P] | BatchGenerate[P],
    rubric: Rubric | None,
    *,
    axis_of: Callable[[K], Hashable | None] | None,
    progress: bool | None,
    label: str,
    checkpoint: Path | None = None,
    judge: Judge | None = None,
    cells: dict[tuple[OutcomeBucket, JudgeVerdict], int] | None = None,
    resume_anyway: bool = False,
    stop_when_decided: bool = True,
    usage: list[int] | None = None,
) -> dict[K, Outcome]:
    rules = Rubric.default() if rubric is None else rubric
    # (Once: isinstance against a runtime-checkable Protocol is slow.)
    batched = isinstance(generate, BatchGenerate)
    stopping = _stops(generate, batched, judge, stop_when_decided)
    outcomes: dict[K, Outcome] = {}
    journal: _journal.Journal | None = None
    if checkpoint is not None:
        journal, done = _journal.Journal.open(
            checkpoint,
            rules,
            identity=_run_identity.RunIdentity.of(generate, rules, stops=stopping),
            digests={k: _run_identity.prompt_digest(p) for k, p in prompts.items()},
            anyway=resume_anyway,
        )
        stray = [k for k in done if k not in prompts]
        if stray:
            journal.close()
            raise InvalidInputError(
                f"the checkpoint {checkpoint} holds {len(stray)} prompt ids this run does not "
                "have: it belongs to another run"
            )
        outcomes.update(cast("dict[K, Outcome]", done))
    bar = _Progress(len(prompts), label, enabled=progress)
    tally = ArmTally.of(outcomes.values())
    items = [(k, p) for k, p in prompts.items() if k not in outcomes]
    try:
        size = _batch_size(generate, batched)
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            stops = _stop_list([k for k, _ in chunk], rules, axis_of) if stopping else None
            results = _generate_chunk([p for _, p in chunk], generate, batched, stops)
            batch: dict[Hashable, Outcome] = {}
            for (prompt_id, _prompt), result in zip(chunk, results, strict=True):
                if isinstance(result, Error):
                    outcome: Outcome = result
                else:
                    _count_tokens(result, usage)
                    axis = None if axis_of is None else axis_of(prompt_id)
                    outcome = classify(result, rules, axis=axis)
                    if judge is not None and cells is not None:
                        verdict = judge_completion(result, judge)
                        if verdict is not None and not isinstance(outcome, Error | Empty):
                            key = (OutcomeBucket.of(outcome), verdict)
                            cells[key] = cells.get(key, 0) + 1
                batch[prompt_id] = outcome
                tally = tally + ArmTally.of([outcome])
            del results
            outcomes.update(cast("dict[K, Outcome]", batch))
            if journal is not None:
                journal.append(batch)
            bar.update(tally)
    finally:
        bar.close()
        if journal is not None:
            journal.close()
    return {k: outcomes[k] for k in prompts}


def run_arm(
    prompts: Mapping[K, P],
    generate: Generate[P],
    rubric: Rubric | None = None,
    *,
    axis_of: Callable[[K], Hashable | None] | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    resume_anyway: bool = False,
    stop_when_decided: bool = True,
) -> ArmTally:
    """Generate and classify every prompt; return the tally.

    Args:
        prompts: the caller's prompts keyed by the caller's ids.
        generate: called once per prompt; returns a :class:`Completion`, a
            :class:`Sealed` or a ``str``. An exception gives ``Error(GENERATION)``.
        rubric: the rules (``Rubric.default()`` when ``None``).
        axis_of: the axis of a prompt id, for axis-mapped rubrics (``None``: none).
        progress: show counts on stderr (default: only on a terminal).
        checkpoint: a journal of outcomes by prompt id (never text), one line
            appended per batch. When it exists the run resumes: prompts it already
            holds are not generated again. Prompt ids must be str or int. The
            journal is bound to its run: a resume whose generator (model, server,
            generation settings), rubric, or stored prompts' texts differ raises
            :class:`~probewise.errors.CheckpointMismatchError` naming what differs,
            and a second run on it at once raises
            :class:`~probewise.errors.CheckpointInUseError`.
        resume_anyway: resume a checkpoint that belongs to another run (or was
            written by an earlier probewise), keeping its outcomes as this run's.
        stop_when_decided: with a generator that can stop a reply
            (``OpenAICompatibleGenerator(stream=True)``, :class:`TransformersGenerator`),
            stop each reply once its outcome is decided
            (:func:`~probewise.responses.decided_outcome`): the outcome is the whole
            reply's, marked ``decided`` and never truncated. On by default; it has no
            effect on other generators. The tally's ``tokens`` and ``counted`` say how
            many tokens were generated, where the generator counts them.
    """
    usage = [0, 0]
    outcomes = _outcomes(
        prompts,
        generate,
        rubric,
        axis_of=axis_of,
        progress=progress,
        label="arm",
        checkpoint=None if checkpoint is None else Path(checkpoint),
        resume_anyway=resume_anyway,
        stop_when_decided=stop_when_decided,
        usage=usage,
    )
    return attrs.evolve(ArmTally.of(outcomes.values()), tokens=usage[0], counted=usage[1])


def _run_shard(
    shard: Mapping[K, P],
    make_generator: Callable[[], Generate[P] | BatchGenerate[P]],
    rubric: Rubric | None,
    axis_of: Callable[[K], Hashable | None] | None,
) -> ArmTally:
    """One shard's tally, where the executor runs it (top level: it must pickle)."""
    outcomes = _outcomes(
        shard, make_generator(), rubric, axis_of=axis_of, progress=False, label="shard"
    )
    return ArmTally.of(outcomes.values())


def run_arm_shards(
    shards: Sequence[Mapping[K, P]],
    make_generator: Callable[[], Generate[P] | BatchGenerate[P]],
    rubric: Rubric | None = None,
    *,
    executor: Executor | None = None,
    axis_of: Callable[[K], Hashable | None] | None = None,
) -> ArmTally:
    """:func:`run_arm` over prompt sets split across processes or machines, summed.

    A generator holding a model (or a connection pool) does not pickle, so the
    executor is given ``make_generator`` instead: a picklable callable (a top-level
    function, or ``functools.partial(OpenAICompatibleGenerator, url, model, ...)``)
    that each task calls where it runs, then runs its shard through it. Only the
    shard's :class:`ArmTally` (counts, never text) comes back; the tallies are summed
    in shard order (exact: ``+`` is a commutative monoid). ``executor`` is any
    :class:`concurrent.futures.Executor` (``distributed.Client(...).get_executor()``
    for Dask); None runs the shards one after another here. ``rubric`` and
    ``axis_of`` travel to the tasks and must pickle too. A prompt id in two shards
    is refused (it would be counted twice). An exception in a task is raised here
    as the task raised it, for the first failing shard in order. No checkpoint: a
    caller who wants one runs :func:`run_arm` with ``checkpoint=`` per shard.
    """
    seen: set[Hashable] = set()
    for shard in shards:
        repeated = seen.intersection(shard)
        if repeated:
            raise InvalidInputError(
                f"{len(repeated)} prompt ids are in more than one shard; shards must not overlap"
            )
        seen.update(shard)
    if executor is None:
        results = [_run_shard(shard, make_generator, rubric, axis_of) for shard in shards]
    else:
        futures = [
            executor.submit(_run_shard, shard, make_generator, rubric, axis_of) for shard in shards
        ]
        try:
            results = [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()
    total = ArmTally()
    for tally in results:
        total = total + tally
    return total


@final
@attrs.frozen(kw_only=True)
class OutcomePair:
    """One prompt's outcomes in arm A and arm B, named by the caller's prompt id."""

    prompt_id: Hashable
    a: Outcome
    b: Outcome


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
    judge_a: JudgeAgreement | None = None
    """Rules against the judge over arm A, when a judge ran."""
    judge_b: JudgeAgreement | None = None

    def test(self, bucket: OutcomeBucket) -> McNemar:
        """The paired test for ``bucket``."""
        for result in self.mcnemar:
            if result.bucket is bucket:
                return result
        raise ArgumentTypeError(
            f"PairedResult.test takes an OutcomeBucket, got {type(bucket).__name__}"
        )


def _arm_files(path: Path) -> tuple[Path, Path]:
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: not a name to build on
        raise InputFileError("the checkpoint is not a regular file", path=str(path))
    suffix = path.suffix or ".json"
    stem = path.with_suffix("") if path.suffix else path
    return stem.with_name(stem.name + ".a" + suffix), stem.with_name(stem.name + ".b" + suffix)


def run_paired(
    prompts: Mapping[K, P],
    generate_a: Generate[P],
    generate_b: Generate[P],
    rubric: Rubric | None = None,
    *,
    axis_of: Callable[[K], Hashable | None] | None = None,
    progress: bool | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    judge: Judge | None = None,
    resume_anyway: bool = False,
    stop_when_decided: bool = True,
) -> PairedResult:
    """Run both arms over the same prompts and compare them pair by pair.

    Arm A runs over every prompt, then arm B. With ``checkpoint=PATH`` each arm keeps
    its own checkpoint beside it (``PATH`` with ``.a`` / ``.b`` before the suffix,
    e.g. ``run.a.json`` and ``run.b.json``), and a rerun resumes both, each bound
    to its own arm's run as :func:`run_arm` says (``resume_anyway`` as there). With a
    ``judge`` each completion also gets the judge's verdict, and the result counts
    per arm where rules and judge agree and differ (:class:`JudgeAgreement`;
    prompts resumed from a checkpoint are not re-judged and count as unjudged). The control verdict
    (:func:`~probewise.compare_arms`) reads the two tallies; the McNemar tests read
    the pairs, which is the right test when the same prompts went to both arms.
    ``stop_when_decided`` as :func:`run_arm` says (off with a ``judge``, which reads
    the whole reply); each tally counts the tokens generated.
    """
    usage_a, usage_b = [0, 0], [0, 0]
    files = (None, None) if checkpoint is None else _arm_files(Path(checkpoint))
    cells_a: dict[tuple[OutcomeBucket, JudgeVerdict], int] = {}
    cells_b: dict[tuple[OutcomeBucket, JudgeVerdict], int] = {}
    outcomes_a = _outcomes(
        prompts,
        generate_a,
        rubric,
        axis_of=axis_of,
        progress=progress,
        label="arm A",
        checkpoint=files[0],
        judge=judge,
        cells=cells_a,
        resume_anyway=resume_anyway,
        stop_when_decided=stop_when_decided,
        usage=usage_a,
    )
    outcomes_b = _outcomes(
        prompts,
        generate_b,
        rubric,
        axis_of=axis_of,
        progress=progress,
        label="arm B",
        checkpoint=files[1],
        judge=judge,
        cells=cells_b,
        resume_anyway=resume_anyway,
        stop_when_decided=stop_when_decided,
        usage=usage_b,
    )
    pairs = tuple(OutcomePair(prompt_id=k, a=outcomes_a[k], b=outcomes_b[k]) for k in prompts)
    tally_a = attrs.evolve(ArmTally.of(outcomes_a.values()), tokens=usage_a[0], counted=usage_a[1])
    tally_b = attrs.evolve(ArmTally.of(outcomes_b.values()), tokens=usage_b[0], counted=usage_b[1])
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
        tests.append(mcnemar(bucket, only_a, only_b))
    return PairedResult(
        pairs=pairs,
        tally_a=tally_a,
        tally_b=tally_b,
        control=compare_arms(tally_a, tally_b),
        mcnemar=tuple(tests),
        judge_a=None
        if judge is None
        else JudgeAgreement(cells=cells_a, unjudged=len(prompts) - sum(cells_a.values())),
        judge_b=None
        if judge is None
        else JudgeAgreement(cells=cells_b, unjudged=len(prompts) - sum(cells_b.values())),
    )
