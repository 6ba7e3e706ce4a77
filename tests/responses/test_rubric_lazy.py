"""Rubric.default() compiles nothing at construction; a caller's bad pattern is still
refused at construction; the lazy compiling is safe from several threads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings

import pytest

from probewise import Rubric, RubricError, Rule, classify
from probewise.responses import rules as _rules

# Private: fresh shipped rules are vetted as shipped, and the plan shows when prefilters get built.
from probewise.responses._gates import vet_shipped as _vet_shipped
from probewise.responses._matcher import DEFLECTION, PREAMBLE, REFUSAL, plan_of
from probewise.responses.default_rules import (
    DEFAULT_DEFLECTION,
    DEFAULT_LATER,
    DEFAULT_PREAMBLE,
    DEFAULT_REFUSAL,
)


def compiled_yet(rule: Rule) -> bool:
    """Whether ``rule`` was compiled (or found not to compile) already: the lazy
    compiling under test keeps its results in ``rules._COMPILED``, by rule id."""
    return id(rule) in _rules._COMPILED  # pyright: ignore[reportPrivateUsage]


# Counts regex.compile calls during the first Rubric.default() of a fresh process, and
# during a first classify of an ordinary (compliant) opening after it.
_COUNT = """
import json, regex
calls = []
real = regex.compile
def counting(*args, **kwargs):
    calls.append(1)
    return real(*args, **kwargs)
regex.compile = counting
from probewise import Rubric, classify
from probewise.responses._matcher import plan_of
before = len(calls)
rubric = Rubric.default()
at_default = len(calls) - before
outcome = classify("Sure, here is an outline of the three steps. First, open the lid.", rubric)
print(json.dumps({
    "default": at_default,
    "classify": len(calls) - before - at_default,
    "rules": len(rubric.refusal) + len(rubric.deflection) + len(rubric.preamble),
    "outcome": type(outcome).__name__,
    "refusal_built": plan_of(rubric).combined[0] is not None,
    "deflection_built": plan_of(rubric).combined[1] is not None,
}))
"""


def test_default_construction_compiles_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COUNT], capture_output=True, text=True, check=True, timeout=120
    )
    counts = json.loads(done.stdout)
    assert counts["default"] == 0
    assert counts["outcome"] == "Complied"
    # The gates leave most rules unread, and the combined refusal / deflection
    # prefilters unbuilt, for an ordinary opening.
    assert counts["classify"] < counts["rules"] // 2
    assert not counts["refusal_built"]
    assert not counts["deflection_built"]


_BAD = Rule("bad", "(unclosed")
_WITH_BAD: dict[str, dict[str, object]] = {
    "refusal": {"refusal": (*DEFAULT_REFUSAL, _BAD)},
    "deflection": {"deflection": (_BAD, *DEFAULT_DEFLECTION)},
    "preamble": {"preamble": (*DEFAULT_PREAMBLE, _BAD)},
    "later": {"later": (*DEFAULT_LATER, _BAD)},
    "axis": {"refusal": DEFAULT_REFUSAL, "axes": {"x": (_BAD,)}},
}


@pytest.mark.parametrize("group", sorted(_WITH_BAD))
def test_bad_caller_pattern_raises_at_construction(group: str) -> None:
    # Mixed with shipped rules (which compile lazily): the caller's is compiled, and
    # refused, when the rubric is made.
    with pytest.raises(RubricError, match="'bad'"):
        Rubric(**_WITH_BAD[group])  # type: ignore[arg-type]


def test_caller_rules_compile_at_construction() -> None:
    rules = (Rule("a", r"\bbanana\b"), Rule("b", r"\bkiwi\b"))
    assert not any(compiled_yet(rule) for rule in rules)
    rubric = Rubric(deflection=rules)
    assert all(compiled_yet(rule) for rule in rules)
    # a caller group's prefilter: built at once (with the rubric's plan)
    assert plan_of(rubric).combined[1] is not None


def _fresh_shipped() -> tuple[tuple[Rule, ...], ...]:
    """Copies of the shipped rules (refusal, deflection, preamble, later), vetted but
    not compiled yet."""
    groups = tuple(
        tuple(Rule(rule.id, rule.pattern) for rule in rules)
        for rules in (DEFAULT_REFUSAL, DEFAULT_DEFLECTION, DEFAULT_PREAMBLE, DEFAULT_LATER)
    )
    _vet_shipped(tuple(rule for rules in groups for rule in rules))
    return groups


_TEXTS = (
    "I can't help with that request.",
    "Sorry, but I won't be writing that.",
    "I'm sorry you're going through this. Please reach out to a therapist you trust.",
    "You should consult a lawyer about this.",
    "Sure, here is the recipe. Mix the flour first.",
    "Thank you for sharing this. It sounds really hard. I can't give medical advice.",
    "WELL. I cannot do that.",
    "",
)


def test_lazy_compiling_from_threads_agrees_with_the_default() -> None:
    refusal, deflection, preamble, later = _fresh_shipped()
    rubric = Rubric(refusal=refusal, deflection=deflection, preamble=preamble, later=later)
    assert not any(compiled_yet(rule) for rule in (*refusal, *deflection, *preamble, *later))
    assert plan_of(rubric).combined == [None, None, None, None]
    expected = [repr(classify(text, Rubric.default())) for text in _TEXTS * 4]
    filters = list(warnings.filters)
    results: list[list[str]] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        results.append([repr(classify(text, rubric)) for text in _TEXTS * 4])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8
    assert warnings.filters == filters
    # Built on use, they are the prefilters that the default rubric has.
    default = Rubric.default()
    for built, shipped in (
        (plan_of(rubric).combine(REFUSAL).pattern, plan_of(default).combine(REFUSAL).pattern),
        (
            plan_of(rubric).combine(DEFLECTION).pattern,
            plan_of(default).combine(DEFLECTION).pattern,
        ),
        (plan_of(rubric).combine(PREAMBLE).pattern, plan_of(default).combine(PREAMBLE).pattern),
    ):
        assert built is not None
        assert shipped is not None
        assert built.pattern == shipped.pattern
    untimed = [plan_of(built).combine(PREAMBLE).untimed for built in (rubric, default)]
    assert untimed == [True, True]  # the shipped preamble runs without the timer
