"""No text in the frame locals of a traceback: a wrong-typed argument holding text to
Completion, Sealed or ArmTally.of, and a judge that raises a BaseException (issue 30). A traceback
printed with locals (rich, pytest --showlocals, error trackers) walks these frames."""

from __future__ import annotations

import traceback

import pytest

from probewise import ArgumentTypeError, ArmTally, Completion, Complied, InvalidInputError, Sealed
from probewise.responses import JudgeVerdict, judge_completion

CANARY = "zq-canary-frame-91e2"


def _locals_of(error: BaseException) -> str:
    """Every local of every frame the traceback (and its chain) keeps, as repr."""
    seen: list[str] = []
    current: BaseException | None = error
    while current is not None:
        for frame, _ in traceback.walk_tb(current.__traceback__):
            seen.append(repr(frame.f_locals))
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


def _here_and_below(error: BaseException) -> str:
    """The locals of the frames below this test's own (which holds the value itself)."""
    frames = list(traceback.walk_tb(error.__traceback__))[1:]
    return "\n".join(repr(frame.f_locals) for frame, _ in frames)


@pytest.mark.parametrize(
    "value", [CANARY.encode(), [CANARY], {"text": CANARY}, bytearray(CANARY.encode())]
)
def test_sealed_drops_a_wrong_typed_value_before_raising(value: object) -> None:
    with pytest.raises(ArgumentTypeError) as info:
        Sealed(value)  # type: ignore[arg-type]
    below = _here_and_below(info.value)
    assert below  # the constructor's frame is there
    assert CANARY not in below, "text left in a frame's locals"


@pytest.mark.parametrize(
    "value", [CANARY.encode(), [CANARY], {"text": CANARY}, bytearray(CANARY.encode())]
)
def test_completion_drops_a_wrong_typed_text_before_raising(value: object) -> None:
    with pytest.raises(
        ArgumentTypeError, match=r"Completion\.text must be a str or Sealed"
    ) as info:
        Completion(value)  # type: ignore[arg-type]
    below = _here_and_below(info.value)
    assert below  # the constructor's frame is there, and its half-made self reprs
    assert CANARY not in below, "text left in a frame's locals"
    with pytest.raises(ArgumentTypeError) as info:
        Completion(text=value)  # type: ignore[arg-type]
    assert CANARY not in _here_and_below(info.value)


def test_completion_is_unchanged_for_its_callers() -> None:
    done = Completion("a reply")
    assert repr(done) == (
        "Completion(text=Sealed(<7 chars>), finish_reason=<FinishReason.STOP: 'stop'>, tokens=None)"
    )
    assert Completion(done.text).text is done.text
    assert Completion("a reply", tokens=3).tokens == 3
    with pytest.raises(InvalidInputError, match=r"Completion\.tokens"):
        Completion("a reply", tokens=-1)
    with pytest.raises(ArgumentTypeError, match="finish_reason must be a FinishReason, got str"):
        Completion("a reply", "length")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        done.text = Sealed("other")  # type: ignore[misc]


@pytest.mark.parametrize("bad", [CANARY, CANARY.encode(), [CANARY]])
def test_arm_tally_of_drops_the_item_and_the_iterable_before_raising(bad: object) -> None:
    with pytest.raises(ArgumentTypeError, match=r"ArmTally\.of takes outcomes"):
        ArmTally.of([Complied(), bad])  # type: ignore[list-item]
    with pytest.raises(ArgumentTypeError) as info:
        ArmTally.of([Complied(), bad])  # type: ignore[list-item]
    below = _here_and_below(info.value)
    assert below
    assert CANARY not in below, "text left in a frame's locals"


class _Stop(BaseException):
    pass


@pytest.mark.parametrize("stop", [KeyboardInterrupt, _Stop])
def test_a_judge_raising_a_base_exception_leaves_no_text_in_any_frame(
    stop: type[BaseException],
) -> None:
    def judge(text: str) -> JudgeVerdict:
        raise stop(text)

    with pytest.raises(stop) as info:
        judge_completion(f"Here is the answer. {CANARY}", judge)
    assert info.value.args == ()
    below = _here_and_below(info.value)
    assert below
    assert CANARY not in below, "text left in a frame's locals"
    assert CANARY not in _locals_of(info.value).split("\n", 1)[-1]
    assert CANARY not in "".join(traceback.format_exception(info.value))
