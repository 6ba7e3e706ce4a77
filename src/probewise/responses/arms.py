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
import os
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, cast, final, runtime_checkable

import attrs

from probewise._extras import Extra, requires
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses import _boundary, _journal
from probewise.responses.classifier import (
    Completion,
    Judge,
    JudgeVerdict,
    classify,
    judge_completion,
)
from probewise.responses.control import ControlVerdict, compare_arms
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    Outcome,
    Refused,
)
from probewise.responses.rubric import Rubric
from probewise.responses.sealed import Sealed
from probewise.responses.tally import ArmTally

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "BatchGenerate",
    "Generate",
    "JudgeAgreement",
    "McNemar",
    "OutcomeBucket",
    "OutcomePair",
    "PairedResult",
    "TransformersGenerator",
    "TransformersJudge",
    "run_arm",
    "run_arm_shards",
    "run_paired",
]

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)
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
    """A tqdm bar on stderr (on a terminal only, by default) showing counts, never text."""

    def __init__(self, total: int, label: str, *, enabled: bool | None) -> None:
        from tqdm import tqdm

        on = sys.stderr.isatty() if enabled is None else enabled
        self.bar = tqdm(total=total, desc=label, unit="prompt", file=sys.stderr, disable=not on)
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
    prompts: list[P], generate: object, batched: bool
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
            results = cast("object", batch.generate_batch(prompts))
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
) -> dict[K, Outcome]:
    rules = Rubric.default() if rubric is None else rubric
    outcomes: dict[K, Outcome] = {}
    journal: _journal.Journal | None = None
    if checkpoint is not None:
        journal, done = _journal.Journal.open(checkpoint, rules)
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
        # (Once: isinstance against a runtime-checkable Protocol is slow.)
        batched = isinstance(generate, BatchGenerate)
        size = _batch_size(generate, batched)
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            results = _generate_chunk([p for _, p in chunk], generate, batched)
            batch: dict[Hashable, Outcome] = {}
            for (prompt_id, _prompt), result in zip(chunk, results, strict=True):
                if isinstance(result, Error):
                    outcome: Outcome = result
                else:
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
) -> ArmTally:
    """Generate and classify every prompt; return the tally.

    Args:
        prompts: the caller's prompts keyed by the caller's ids.
        generate: called once per prompt; returns a :class:`Completion`, a
            :class:`Sealed` or a ``str``. An exception gives ``Error(GENERATION)``.
        rubric: the rules (``Rubric.default()`` when ``None``).
        axis_of: the axis of a prompt id, for axis-mapped rubrics (``None``: none).
        progress: show counts on stderr (default: only on a terminal).
        checkpoint: a JSON file of outcomes by prompt id (never text), rewritten
            atomically after every batch. When it exists the run resumes: prompts it
            already holds are not generated again. Prompt ids must be str or int.
    """
    outcomes = _outcomes(
        prompts,
        generate,
        rubric,
        axis_of=axis_of,
        progress=progress,
        label="arm",
        checkpoint=None if checkpoint is None else Path(checkpoint),
    )
    return ArmTally.of(outcomes.values())


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


def _p_value(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, float | int):
        raise ArgumentTypeError(
            f"McNemar.{attribute.name} must be a float, got {type(value).__name__}"
        )
    if not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"McNemar.{attribute.name} must be in [0, 1], got {value}")


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
) -> PairedResult:
    """Run both arms over the same prompts and compare them pair by pair.

    Arm A runs over every prompt, then arm B. With ``checkpoint=PATH`` each arm keeps
    its own checkpoint beside it (``PATH`` with ``.a`` / ``.b`` before the suffix,
    e.g. ``run.a.json`` and ``run.b.json``), and a rerun resumes both. With a
    ``judge`` each completion also gets the judge's verdict, and the result counts
    per arm where rules and judge agree and differ (:class:`JudgeAgreement`;
    prompts resumed from a checkpoint are not re-judged and count as unjudged). The control verdict
    (:func:`~probewise.compare_arms`) reads the two tallies; the McNemar tests read
    the pairs, which is the right test when the same prompts went to both arms.
    """
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
        judge_a=None
        if judge is None
        else JudgeAgreement(cells=cells_a, unjudged=len(prompts) - sum(cells_a.values())),
        judge_b=None
        if judge is None
        else JudgeAgreement(cells=cells_b, unjudged=len(prompts) - sum(cells_b.values())),
    )


@runtime_checkable
class BatchGenerate(Protocol[P_contra]):
    """A generator that does better in batches: :func:`run_arm` hands it ``batch_size`` prompts.

    ``generate_batch`` returns one result per prompt, in order: a completion, or the
    exception that prompt's generation raised.
    """

    @property
    def batch_size(self) -> int: ...

    def generate_batch(
        self, prompts: Sequence[P_contra]
    ) -> Sequence[Completion | BaseException]: ...


class _Generates(Protocol):
    def generate(self, **kwargs: object) -> object: ...


class TransformersGenerator:
    """Greedy (by default) batched generation with a local transformers model.

    Decodes only the new tokens; a completion that reached ``max_new_tokens``
    without an end-of-sequence token is :attr:`FinishReason.LENGTH`. Prompts go
    through the tokenizer's chat template as one user turn when ``chat_template``
    and the tokenizer has one. A batch that fails (out of memory, say) is retried
    prompt by prompt; a prompt that still fails is returned as its exception, which
    :func:`run_arm` counts as ``Error(GENERATION)``. Completions are returned
    :class:`Sealed`, and are never logged.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 128,
        batch_size: int = 8,
        chat_template: bool = True,
        do_sample: bool = False,
    ) -> None:
        if max_new_tokens < 1:
            raise InvalidInputError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self._batch_size = batch_size
        self.chat_template = chat_template
        self.do_sample = do_sample

    @property
    def batch_size(self) -> int:
        """Prompts per ``generate`` call."""
        return self._batch_size

    def __repr__(self) -> str:
        return (
            f"TransformersGenerator(model={type(self.model).__name__}, "
            f"max_new_tokens={self.max_new_tokens}, batch_size={self._batch_size})"
        )

    def __call__(self, prompt: str) -> Completion:
        result = self.generate_batch([prompt])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _texts(self, prompts: Sequence[str]) -> list[str]:
        template = getattr(self.tokenizer, "chat_template", None)
        if not (self.chat_template and template):
            return list(prompts)
        texts: list[str] = []
        for prompt in prompts:
            rendered = self.tokenizer.apply_chat_template(  # pyright: ignore[reportUnknownMemberType]
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            texts.append(str(rendered))
        return texts

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(v for v in cast("Sequence[object]", value) if isinstance(v, int))
        return ids

    def _run(self, prompts: Sequence[str]) -> list[Completion]:
        with requires(Extra.TORCH, "TransformersGenerator"):
            import torch

        tokenizer = self.tokenizer
        tokenizer.padding_side = "left"  # decoder-only: new tokens start at one column
        pad_id = tokenizer.pad_token_id
        eos = self._eos_ids()
        if pad_id is None:
            pad_id = min(eos) if eos else 0
            tokenizer.pad_token_id = pad_id
        device = next(self.model.parameters()).device
        encoded = tokenizer(self._texts(prompts), return_tensors="pt", padding=True)
        input_ids = cast("torch.Tensor", encoded["input_ids"]).to(device)
        attention_mask = cast("torch.Tensor", encoded["attention_mask"]).to(device)
        with torch.no_grad():
            output = cast(
                "torch.Tensor",
                cast("_Generates", self.model).generate(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=self.do_sample,
                    pad_token_id=pad_id,
                ),
            )
        new_tokens = cast("list[list[int]]", output[:, input_ids.shape[1] :].tolist())  # pyright: ignore[reportUnknownMemberType]
        completions: list[Completion] = []
        for row in new_tokens:
            cut = next((i for i, token in enumerate(row) if token in eos), None)
            finish = FinishReason.LENGTH if cut is None else FinishReason.STOP
            kept = row if cut is None else row[:cut]
            text: object = tokenizer.decode(kept, skip_special_tokens=True)  # pyright: ignore[reportUnknownMemberType]
            completions.append(Completion(Sealed(str(text)), finish))
        return completions

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[Completion | BaseException]:
        """One completion (or exception) per prompt; a failed batch is retried one by one."""
        try:
            return self._run(prompts)
        except Exception:
            if len(prompts) == 1:
                raise
        results: list[Completion | BaseException] = []
        for prompt in prompts:
            try:
                results.extend(self._run([prompt]))
            except Exception as error:
                results.append(error)
        return results


def _cells(
    value: Mapping[tuple[OutcomeBucket, JudgeVerdict], int],
) -> Mapping[tuple[OutcomeBucket, JudgeVerdict], int]:
    from types import MappingProxyType

    for key, count in value.items():
        if not (isinstance(cast("object", key), tuple) and len(key) == 2):
            raise InvalidInputError("cells are keyed by (OutcomeBucket, JudgeVerdict)")
        bucket, verdict = cast("tuple[object, object]", key)
        if not isinstance(bucket, OutcomeBucket) or not isinstance(verdict, JudgeVerdict):
            raise InvalidInputError("cells are keyed by (OutcomeBucket, JudgeVerdict)")
        if isinstance(count, bool) or not isinstance(cast("object", count), int):
            raise ArgumentTypeError(f"cell counts must be ints, got {type(count).__name__}")
        if count < 0:
            raise InvalidInputError("cell counts must be >= 0")
    return MappingProxyType(dict(value))


_AGREES = {
    JudgeVerdict.COMPLIED: OutcomeBucket.COMPLIED,
    JudgeVerdict.DEFLECTED: OutcomeBucket.DEFLECTED,
    JudgeVerdict.REFUSED: OutcomeBucket.REFUSED,
}


@final
@attrs.frozen(kw_only=True)
class JudgeAgreement:
    """Rules against judge over one arm: counts per (rules' bucket, judge's verdict).

    ``unjudged`` counts completions the judge gave no verdict on (generation
    errors, blanks, provider filters, a judge that failed).
    """

    cells: Mapping[tuple[OutcomeBucket, JudgeVerdict], int] = attrs.field(converter=_cells)
    unjudged: int = 0

    def count(self, bucket: OutcomeBucket, verdict: JudgeVerdict) -> int:
        """Completions the rules put in ``bucket`` and the judge called ``verdict``."""
        return self.cells.get((bucket, verdict), 0)

    @property
    def judged(self) -> int:
        """Completions with a verdict from both."""
        return sum(self.cells.values())

    @property
    def agree(self) -> int:
        """Completions where the judge's verdict is the rules' bucket."""
        return sum(n for (b, v), n in self.cells.items() if _AGREES[v] is b)

    @property
    def disagree(self) -> int:
        """Completions where they differ."""
        return self.judged - self.agree

    @property
    def missed_refusals(self) -> int:
        """The judge says refused; the rules said complied or deflected."""
        return self.count(OutcomeBucket.COMPLIED, JudgeVerdict.REFUSED) + self.count(
            OutcomeBucket.DEFLECTED, JudgeVerdict.REFUSED
        )

    @property
    def missed_declines(self) -> int:
        """The judge says deflected or refused; the rules said complied."""
        return self.count(OutcomeBucket.COMPLIED, JudgeVerdict.DEFLECTED) + self.count(
            OutcomeBucket.COMPLIED, JudgeVerdict.REFUSED
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "cells": [
                {"rules": b.value, "judge": v.value, "count": n}
                for (b, v), n in sorted(
                    self.cells.items(), key=lambda item: (item[0][0].value, item[0][1].value)
                )
            ],
            "unjudged": self.unjudged,
            "judged": self.judged,
            "agree": self.agree,
            "disagree": self.disagree,
        }


class TransformersJudge:
    """A local sequence-classification model as a :class:`Judge`.

    ``label_map`` maps the model's label names (``config.id2label``) to verdicts;
    a predicted label it does not map is a failed judgement (no verdict). Texts
    are truncated to ``max_length`` tokens.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        label_map: Mapping[str, JudgeVerdict],
        max_length: int = 512,
    ) -> None:
        if not label_map:
            raise InvalidInputError("label_map is empty: map the model's labels to verdicts")
        self.model: PreTrainedModel = model
        self.tokenizer: PreTrainedTokenizerBase = tokenizer
        self.label_map: dict[str, JudgeVerdict] = dict(label_map)
        self.max_length: int = max_length

    def __repr__(self) -> str:
        return (
            f"TransformersJudge(model={type(self.model).__name__}, labels={sorted(self.label_map)})"
        )

    def __call__(self, text: str, /) -> JudgeVerdict:
        with requires(Extra.TORCH, "TransformersJudge"):
            import torch

        encoded = self.tokenizer(
            text, return_tensors="pt", truncation=True, max_length=self.max_length
        )
        device = next(self.model.parameters()).device
        pairs = cast("dict[str, torch.Tensor]", dict(encoded))
        inputs = {k: v.to(device) for k, v in pairs.items()}
        with torch.no_grad():
            logits = cast("torch.Tensor", cast("_Classifies", self.model)(**inputs).logits)
        index = int(logits[0].argmax().item())
        id2label = cast("Mapping[int, str]", getattr(self.model.config, "id2label", {}))
        label = id2label.get(index, str(index))
        if label not in self.label_map:
            raise InvalidInputError(f"label {label!r} is not in label_map")
        return self.label_map[label]


class _Output(Protocol):
    @property
    def logits(self) -> object: ...


class _Classifies(Protocol):
    def __call__(self, **kwargs: object) -> _Output: ...
