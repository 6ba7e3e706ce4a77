"""The text boundary against BaseException: what escapes run_arm, run_paired,
judge_completion and classify holds no completion text, in its message or in the
locals of any frame its traceback keeps (as a locals-capturing reporter prints them)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence

import pytest

from probewise import (
    ArgumentTypeError,
    ArmTally,
    Completion,
    Complied,
    Error,
    ErrorKind,
    FinishReason,
    ProbewiseError,
    Rubric,
    Rule,
    Sealed,
    classify,
    run_arm,
    run_paired,
)
from probewise.responses import judge_completion
from probewise.responses import rules as rules_module
from probewise.responses.judge import JudgeVerdict
from probewise.responses.rules import compile_rule

CANARY = "zq-boundary-canary-5d1a"


def _leaked(error: BaseException) -> bool:
    """Whether the canary shows in what a locals-capturing reporter would print, or in
    any frame, argument or chained exception the error carries."""
    parts: list[str] = []
    seen: set[int] = set()
    chain: BaseException | None = error
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        report = traceback.TracebackException(
            type(chain), chain, chain.__traceback__, capture_locals=True
        )
        parts.extend(report.format())
        parts.append(repr(chain.args))
        parts.append(repr(vars(chain)) if hasattr(chain, "__dict__") else "")
        tb = chain.__traceback__
        while tb is not None:
            parts.extend(repr(value) for value in tb.tb_frame.f_locals.values())
            tb = tb.tb_next
        chain = chain.__cause__ or chain.__context__
    return any(CANARY in part for part in parts)


class Halt(BaseException):
    """A BaseException whose constructor needs the text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _raiser(kind: Callable[[str], BaseException]) -> Callable[[str], Completion]:
    def generate(prompt: str) -> Completion:
        text = f"the model said {CANARY}"  # in this frame's locals too
        raise kind(text)

    return generate


BASES: list[Callable[[str], BaseException]] = [KeyboardInterrupt, SystemExit, GeneratorExit, Halt]


@pytest.mark.parametrize("kind", BASES, ids=lambda k: getattr(k, "__name__", "?"))
def test_a_generator_raising_a_base_exception_stops_the_run_without_the_text(
    kind: type[BaseException],
) -> None:
    with pytest.raises(kind) as info:
        run_arm({"a": "x"}, _raiser(kind), progress=False)
    assert not _leaked(info.value), "canary leaked"
    assert info.value.args == ()
    assert info.value.__cause__ is None
    assert info.value.__context__ is None


def test_system_exit_keeps_an_int_code() -> None:
    def generate(prompt: str) -> Completion:
        raise SystemExit(3)

    with pytest.raises(SystemExit) as info:
        run_arm({"a": "x"}, generate, progress=False)
    assert info.value.code == 3


class _BatchRaises:
    batch_size = 4

    def generate_batch(self, prompts: Sequence[str]) -> Sequence[Completion | BaseException]:
        texts = [Completion(f"{CANARY} {p}") for p in prompts]
        raise KeyboardInterrupt(f"stopped after {len(texts)}: {CANARY}")


def test_a_batch_generator_raising_a_base_exception() -> None:
    with pytest.raises(KeyboardInterrupt) as info:
        run_arm({i: "x" for i in range(6)}, _BatchRaises(), progress=False)
    assert not _leaked(info.value), "canary leaked"


def test_a_judge_raising_a_base_exception() -> None:
    def judge(text: str) -> JudgeVerdict:
        raise KeyboardInterrupt(text)

    answer = Completion(f"Here is the answer. {CANARY}")
    with pytest.raises(KeyboardInterrupt) as info:
        judge_completion(answer, judge)
    assert not _leaked(info.value), "canary leaked"

    def generate(prompt: str) -> Completion:
        return Completion(f"Here is the answer. {CANARY}")

    with pytest.raises(KeyboardInterrupt) as info:
        run_paired({"a": "x"}, generate, generate, judge=judge, progress=False)
    assert not _leaked(info.value), "canary leaked"


class _Interrupting:
    """A compiled pattern that is interrupted mid-match (as Ctrl-C would do)."""

    groups = 0
    pattern = "x"

    def search(self, *_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    match = search


def _interrupting_rubric(where: str) -> Rubric:
    rule = Rule("interrupted", "x")
    compile_rule(rule)  # cached for the rule's lifetime; then its pattern is replaced
    rules_module._COMPILED[id(rule)] = _Interrupting()  # type: ignore[assignment]
    if where == "axis":
        return Rubric(axes={"cake": (rule,)})
    return Rubric(refusal=[rule]) if where == "refusal" else Rubric(deflection=[rule])


def _body() -> str:
    return f"\u200bHere is the answer: {CANARY}. " + "more words " * 40


@pytest.mark.parametrize("where", ["refusal", "deflection", "axis"])
@pytest.mark.parametrize("wrap", ["str", "sealed", "completion"])
def test_ctrl_c_during_classify_carries_no_text(where: str, wrap: str) -> None:
    rubric = _interrupting_rubric(where)
    # The text is made in the call, so that this frame holds no copy of its own.
    wrapped: Callable[[str], str | Sealed | Completion] = {
        "str": str,
        "sealed": Sealed,
        "completion": lambda text: Completion(text, FinishReason.STOP),
    }[wrap]
    with pytest.raises(KeyboardInterrupt) as info:
        classify(wrapped(_body()), rubric, axis="cake")
    assert not _leaked(info.value), "canary leaked"


def test_ctrl_c_during_classify_inside_run_arm() -> None:
    def generate(prompt: str) -> str:
        return f"Here is the answer: {CANARY}."

    with pytest.raises(KeyboardInterrupt) as info:
        run_arm({"a": "x"}, generate, _interrupting_rubric("refusal"), progress=False)
    assert not _leaked(info.value), "canary leaked"


def test_exceptions_from_the_generator_are_still_errors() -> None:
    def generate(prompt: str) -> Completion:
        raise RuntimeError(CANARY)

    tally = run_arm({"a": "x", "b": "y"}, generate, progress=False)
    assert tally == ArmTally(error=2)


WRONG_PLACES: list[Callable[[], object]] = [
    lambda: Completion("x", CANARY),  # type: ignore[arg-type]
    lambda: Completion(["list", CANARY]),  # type: ignore[arg-type]
    lambda: Sealed([CANARY]),  # type: ignore[arg-type]
    lambda: Complied(truncated=CANARY),  # type: ignore[arg-type]
    lambda: Complied(evidence=[CANARY]),  # type: ignore[list-item]
    lambda: Error(kind=CANARY),  # type: ignore[arg-type]
    lambda: Error(kind=ErrorKind.DETECTOR, exception_type=CANARY),  # type: ignore[arg-type]
    lambda: ArmTally(complied=CANARY),  # type: ignore[arg-type]
    lambda: ArmTally.of([CANARY]),  # type: ignore[list-item]
    lambda: ArmTally().count(CANARY),  # type: ignore[arg-type]
    lambda: Rule(CANARY, 3),  # type: ignore[arg-type]
    lambda: Rubric(refusal=CANARY),
    lambda: Rubric(refusal=[CANARY]),  # type: ignore[list-item]
    lambda: Rubric(timeout=CANARY),  # type: ignore[arg-type]
    lambda: Rubric(opening_chars=CANARY),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("attempt", WRONG_PLACES)
def test_validators_report_the_type_never_the_value(attempt: Callable[[], object]) -> None:
    with pytest.raises(ProbewiseError) as info:
        attempt()
    assert isinstance(info.value, TypeError | ValueError)
    assert CANARY not in str(info.value), "canary leaked"
    if isinstance(info.value, TypeError):
        assert isinstance(info.value, ArgumentTypeError)
