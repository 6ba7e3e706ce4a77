"""Checked-only typing tests (mypy --strict with warn_unused_ignores, pyright strict).

Never run by pytest. Each ``# type: ignore[code]`` marks a negative case: when it
stops being an error, warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from typing import assert_never, assert_type

import numpy as np
import numpy.typing as npt

from probewise import (
    ArmTally,
    BucketSweep,
    ChunkPlan,
    Completion,
    Complied,
    ControlState,
    ControlVerdict,
    DamageKind,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    KernelKind,
    KernelRow,
    KernelTable,
    LengthInputError,
    LengthStats,
    Outcome,
    PaddingReport,
    PairedResult,
    Proportion,
    Refused,
    Rubric,
    Rule,
    ScalingFit,
    ScalingPoint,
    Sealed,
    TraceFormatError,
    ce_chunk_plan,
    classify,
    compare_arms,
    padding_waste,
    read_lengths,
    run_arm,
    run_paired,
    sweep_buckets,
)
from probewise.responses import (
    JudgeAgreement,
    JudgeVerdict,
    McNemar,
    OutcomeBucket,
    judge_completion,
)
from probewise.throughput import (
    Batching,
    BatchingMode,
    BucketRow,
    BucketStrategy,
    ChromeTraceSet,
    Clock,
    CpuOpRow,
    ExclusionReason,
    FitLoss,
    HistogramBin,
    KernelCapture,
    KernelDiff,
    LengthInput,
    LogitMemory,
    LogitsDtype,
    PaddingPenalty,
    ScalingMeasurement,
    StepBreakdown,
    StepTiming,
    Term,
    Terms,
    TraceSource,
    as_lengths,
    bucket_batches,
    capture_kernels,
    measure_bytes_per_logit,
    measure_scaling,
    padding_penalty,
    read_chrome_traces,
    time_step,
)


def describe(outcome: Outcome) -> str:
    match outcome:
        case Complied(truncated=truncated, evidence=evidence):
            assert_type(truncated, bool)
            assert_type(evidence, tuple[Rule, ...])
            return "complied"
        case Deflected(rule=rule):
            assert_type(rule, Rule | None)
            return "deflected"
        case Refused(rule=rule, by_provider=by_provider):
            assert_type(by_provider, bool)
            return "refused"
        case Empty():
            return "empty"
        case Error(kind=kind, exception_type=exception_type):
            assert_type(kind, ErrorKind)
            assert_type(exception_type, type[BaseException] | None)
            return "error"
        case _:
            assert_never(outcome)


def non_exhaustive(outcome: Outcome) -> str:
    match outcome:
        case Complied() | Deflected() | Refused():
            return "answered"
        case Empty():
            return "empty"
        case _:
            assert_never(outcome)  # type: ignore[arg-type]  # Error is not handled


def api() -> None:
    rubric = Rubric.default()
    assert_type(rubric, Rubric)
    assert_type(classify("text"), Outcome)
    assert_type(classify(Sealed("text"), rubric), Outcome)
    assert_type(classify(Completion("text", FinishReason.LENGTH), rubric, axis="x"), Outcome)
    assert_type(classify(RuntimeError()), Outcome)
    tally = ArmTally.of([classify("a"), classify("b")]) + ArmTally()
    assert_type(tally, ArmTally)
    assert_type(tally.n, int)
    assert_type(tally.rate(Deflected), Proportion)
    assert_type(tally.rate(Empty, over="all").low, float)
    verdict = compare_arms(tally, tally)
    assert_type(verdict, ControlVerdict)
    assert_type(verdict.state, ControlState)
    assert_type(verdict.p_value, float)
    Rubric(refusal=[Rule("r", "no")], axes={"axis": [Rule("a", "yes")]})


def kernels(path: str) -> None:
    table = KernelTable.from_chrome_trace(path, salvage=True)
    assert_type(table, KernelTable)
    assert_type(table.rows, tuple[KernelRow, ...])
    assert_type(table.kernel_us, float)
    assert_type(table.naive_device_us, float | None)
    assert_type(table.steps, tuple[StepBreakdown, ...])
    assert_type(table.sources, tuple[TraceSource, ...])
    assert_type(table.missing_ranks, tuple[int, ...])
    assert_type(table.by_kind(), dict[KernelKind, float])
    assert_type(table.top(3), tuple[KernelRow, ...])
    assert_type(table + KernelTable.empty(), KernelTable)
    assert_type(table.diff(table), KernelDiff)
    assert_type(table.exclusion(ExclusionReason.STREAM_SYNC).events, int)
    assert_type(KernelTable.from_json(table.to_json()), KernelTable)
    assert_type(KernelTable.from_profiler_table("text"), KernelTable)
    assert_type(KernelTable.from_key_averages([]), KernelTable)
    assert_type(table.jobs(), tuple[tuple[TraceSource, ...], ...])
    assert_type(table.sources[0].notes, tuple[str, ...])
    assert_type(KernelTable.from_chrome_trace([path, path], allow_mixed_jobs=True), KernelTable)
    ranks = read_chrome_traces([path, path], workers=1, allow_mixed_jobs=False)
    assert_type(ranks, ChromeTraceSet)
    assert_type(ranks.per_rank, tuple[KernelTable, ...])
    row = table.rows[0]
    assert_type(row.calls, int | None)
    match row.kind:
        case KernelKind.MEMCPY | KernelKind.MEMSET:
            pass
        case (
            KernelKind.GEMM
            | KernelKind.ATTENTION
            | KernelKind.ELEMENTWISE
            | KernelKind.REDUCTION
            | KernelKind.NORMALIZATION
            | KernelKind.COMMUNICATION
            | KernelKind.CONVOLUTION
            | KernelKind.EMBEDDING
            | KernelKind.OTHER
        ):
            pass
        case _:
            assert_never(row.kind)
    try:
        KernelTable.from_chrome_trace(path)
    except TraceFormatError as error:
        assert_type(error.kind, DamageKind | None)
        assert_type(error.offset, int | None)


def lengths(path: str) -> None:
    data = read_lengths(path, field="n", source_field="src")
    assert_type(data, LengthInput)
    assert_type(data.lengths, npt.NDArray[np.int64])
    assert_type(data.source_codes, npt.NDArray[np.int32] | None)
    assert_type(data.sources(), tuple[str, ...] | None)
    assert_type(as_lengths([1, 2]), npt.NDArray[np.int64])
    stats = LengthStats.of(data)
    assert_type(stats.p99, float)
    assert_type(stats.histogram, tuple[HistogramBin, ...])
    report = padding_waste([3, 4], batch_size=2)
    assert_type(report, PaddingReport)
    assert_type(padding_waste(np.array([3, 4]), [[0], [1]]).waste_share, float)
    assert_type(report.mode, BatchingMode)
    plan = ce_chunk_plan(262_144, 16_384, budget_bytes=8 << 30, logits_dtype="bf16")
    assert_type(plan, ChunkPlan)
    assert_type(plan.logits_dtype, LogitsDtype)
    assert_type(plan.n_chunks, int)
    memory = measure_bytes_per_logit(lambda logits, labels: logits.sum(), vocab_size=64, tokens=8)
    assert_type(memory, LogitMemory)
    assert_type(memory.bytes_per_logit, float)
    sweep = sweep_buckets(data, batch_size=8, bucket_sizes=[64, 256])
    assert_type(sweep, BucketSweep)
    assert_type(sweep.rows, tuple[BucketRow, ...])
    assert_type(sweep.best().source_entropy_bits, float | None)
    assert_type(bucket_batches([1, 2], batch_size=1, bucket_size=4), Batching)
    match sweep.random.strategy:
        case BucketStrategy.RANDOM | BucketStrategy.LENGTH_BUCKETS:
            pass
        case BucketStrategy.MEGABATCH | BucketStrategy.CUSTOM:
            pass
        case _:
            assert_never(sweep.random.strategy)
    try:
        read_lengths(path)
    except LengthInputError as error:
        assert_type(error.line, int | None)


def scaling() -> None:
    points = [
        ScalingPoint(512, 0.11),
        ScalingPoint(1024, 0.25, 2),
        ScalingPoint(length=2048, seconds=0.6),
    ]
    fit = ScalingFit.fit(points, loss="soft_l1")
    assert_type(fit, ScalingFit)
    assert_type(ScalingFit.fit(points, loss=FitLoss.LINEAR).dof, int)
    assert_type(fit.stderr, Terms)
    assert_type(fit.predict(4096), float)
    quadratic, linear, fixed = fit.shares(4096, batch=2)
    assert_type(quadratic, float)
    assert_type(linear + fixed, float)
    assert_type(fit.at_bound, tuple[Term, ...])
    for term in fit.at_bound:
        match term:
            case Term.QUADRATIC | Term.LINEAR | Term.FIXED:
                pass
            case _:
                assert_never(term)


def harness() -> None:
    timing = time_step(lambda: None, warmup=1, repeats=3, save_to="/tmp/evidence")
    assert_type(timing, StepTiming)
    assert_type(timing.samples, tuple[float, ...])
    assert_type(timing.clock, Clock)
    result = measure_scaling(lambda length: lambda: None, [512, 1024, 2048], loss="soft_l1")
    assert_type(result, ScalingMeasurement)
    assert_type(result.fit, ScalingFit)
    penalty = padding_penalty(lambda: None, lambda: None)
    assert_type(penalty, PaddingPenalty)
    assert_type(penalty.ratio, float)
    capture = capture_kernels(lambda: None, steps=2, save_to="/tmp/evidence")
    assert_type(capture, KernelCapture)
    assert_type(capture.kernels, KernelTable)
    assert_type(capture.cpu_ops, tuple[CpuOpRow, ...])


def arms() -> None:
    prompts = {"p1": "a prompt", "p2": "another"}

    def generate(prompt: str) -> Completion:
        return Completion("text", FinishReason.STOP)

    assert_type(run_arm(prompts, generate, progress=False), ArmTally)
    result = run_paired(prompts, generate, generate)
    assert_type(result, PairedResult)
    assert_type(result.test(OutcomeBucket.DEFLECTED), McNemar)
    assert_type(result.mcnemar[0].p_value, float)
    assert_type(OutcomeBucket.of(result.pairs[0].a), OutcomeBucket)

    def judge(text: str, /) -> JudgeVerdict:
        return JudgeVerdict.COMPLIED

    judged = run_paired(prompts, generate, generate, judge=judge)
    assert_type(judged.judge_a, JudgeAgreement | None)
    assert_type(judge_completion("text", judge), JudgeVerdict | None)


def negatives() -> None:
    Complied(text="x")  # type: ignore[call-arg]
    outcome = Complied()
    outcome.truncated = True  # type: ignore[misc]
    ArmTally().rate(Complied, over="some")  # type: ignore[arg-type]
    classify(42)  # type: ignore[arg-type]
    Sealed(text="x")  # type: ignore[call-arg]
    KernelRow(name="k", calls=1, device_us=1.0)  # type: ignore[call-arg]  # kind is required
    table = KernelTable.empty()
    table.kernel_us = 1.0  # type: ignore[misc]
    table.top("3")  # type: ignore[arg-type]
    padding_waste([1], batch_size="2")  # type: ignore[arg-type]
    sweep_buckets([1], batch_size=2, bucket_sizes=[4], seed="0")  # type: ignore[arg-type]
    plan = ce_chunk_plan(1, 1, budget_bytes=1)
    plan.n_chunks = 2  # type: ignore[misc]
    ce_chunk_plan(1, 1, 1)  # type: ignore[call-arg]  # budget_bytes is keyword-only
    ScalingFit.fit([ScalingPoint(1, 1.0)], loss="huber")  # type: ignore[arg-type]
    ScalingPoint(1, 1.0).seconds = 2.0  # type: ignore[misc]
    time_step(lambda: None, repeats="3")  # type: ignore[arg-type]
    measure_scaling(lambda length: None, [1, 2, 3])  # type: ignore[arg-type, return-value]
    run_arm({"p": "x"}, lambda prompt: 42)  # type: ignore[arg-type, return-value]


def a_misspelt_name_is_a_type_error() -> None:
    """The lazy faces declare their names; they do not accept any attribute (typos included)."""
    import probewise.responses
    import probewise.throughput

    _ = probewise.KernelTabel  # type: ignore[attr-defined]
    _ = probewise.responses.Judgee  # type: ignore[attr-defined]
    _ = probewise.throughput.Bandd  # type: ignore[attr-defined]
