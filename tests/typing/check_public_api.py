"""Checked-only typing tests (mypy --strict with warn_unused_ignores, pyright strict).

Never run by pytest. Each ``# type: ignore[code]`` marks a negative case: when it
stops being an error, warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from typing import assert_never, assert_type

from probewise import (
    ArmTally,
    ChromeTraceSet,
    Completion,
    Complied,
    ControlState,
    ControlVerdict,
    DamageKind,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    ExclusionReason,
    FinishReason,
    KernelDiff,
    KernelKind,
    KernelRow,
    KernelTable,
    Outcome,
    Proportion,
    Refused,
    Rubric,
    Rule,
    Sealed,
    StepBreakdown,
    TraceFormatError,
    TraceSource,
    classify,
    compare_arms,
    read_chrome_traces,
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
    ranks = read_chrome_traces([path, path], workers=1)
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
