"""Checked-only typing tests (mypy --strict with warn_unused_ignores, pyright strict).

Never run by pytest. Each ``# type: ignore[code]`` marks a negative case: when it
stops being an error, warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from typing import assert_never, assert_type

from probewise import (
    ArmTally,
    Completion,
    Complied,
    ControlState,
    ControlVerdict,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    Outcome,
    Proportion,
    Refused,
    Rubric,
    Rule,
    Sealed,
    classify,
    compare_arms,
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


def negatives() -> None:
    Complied(text="x")  # type: ignore[call-arg]
    outcome = Complied()
    outcome.truncated = True  # type: ignore[misc]
    ArmTally().rate(Complied, over="some")  # type: ignore[arg-type]
    classify(42)  # type: ignore[arg-type]
    Sealed(text="x")  # type: ignore[call-arg]
