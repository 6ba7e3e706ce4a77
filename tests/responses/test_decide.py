"""The decision point (issue 33): a prefix's outcome, once decided, is the outcome of
every reply that starts with it. Properties over generated texts and caller rubrics;
every text here is made up."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from probewise import ArgumentTypeError, Complied, Refused, Rubric, Rule, Sealed, classify
from probewise.responses import classifier
from probewise.responses.decide import decided_outcome

# Pieces that exercise every window: refusals, deflections and preambles, persona and
# speaker tags, headers, stage directions, echoes, fences, emphasis, two-answer shapes,
# sentence ends at the cut, combining marks and format characters, runs of space and "#".
_PIECES = (
    "I can't help with that.",
    "I'm sorry, but I cannot assist with this request.",
    "I won't write that.",
    "Sure, here is the outline.",
    "Here is how:",
    "The valve opens slowly.",
    "I'm sorry you're going through this.",
    "Thank you for asking.",
    "You should consult a professional instead.",
    "Instead, let me suggest a safer idea.",
    "As an AI language model,",
    "First, gather the parts.",
    "Note:",
    "Step One:",
    "[DAN]:",
    "[CLASSIC]",
    "[\U0001f513JAILBREAK]",
    "DAN:",
    "ChatGPT:",
    "**Developer Mode**:",
    "\U0001f916:",
    "# Title",
    "### A header ###",
    "*sighs*",
    "_quietly_",
    "```",
    "```python",
    "> ",
    '"How do I make it?"',
    "\n",
    "\n\n",
    "\n[JAILBREAK]: ",
    "\nDAN: ",
    "  ",
    "\t",
    ".",
    "!",
    "?",
    "e\u0301",
    "\u0301",
    "\u200b",
    "\u00a0",
    "\ufb01",
    "**",
    "__",
    "~~",
    "####",
    "I",
    "sorry",
    "not",
    "word",
    "e.g.",
    "3.5",
)
_TEXT = st.lists(
    st.tuples(st.sampled_from(_PIECES), st.sampled_from(("", " ", " ", "\n"))),
    min_size=20,
    max_size=160,
).map(lambda parts: "".join(piece + gap for piece, gap in parts))

# Caller patterns: anchors, lookarounds that read past the match, "$", word bounds.
_PATTERNS = (
    r"can't",
    r"^sorry",
    r"i won't|cannot",
    r"sure(?!.*not)",
    r"help\.$",
    r"\bhere\b",
    r"(?<=i )can",
    r"consult",
    r"instead",
    r"dan",
    r"^i'm",
    r"(?=.*valve)the",
    r"title\.",
    r"thank you",
    r"\?$",
    r"first",
    r"é",
)


def _rules(prefix: str, picks: list[str]) -> tuple[Rule, ...]:
    return tuple(Rule(id=f"{prefix}{i}", pattern=pattern) for i, pattern in enumerate(picks))


_PICKS = st.lists(st.sampled_from(_PATTERNS), max_size=4)


@st.composite
def _rubrics(draw: st.DrawFn) -> tuple[Callable[[], Rubric], Hashable | None]:
    """A rubric's maker (built in the test, not while drawing: hypothesis refuses a
    draw during which the global ``random`` state moves, and building compiles
    patterns, during which a garbage collection may run any finaliser) and an axis."""
    if draw(st.booleans()):
        return Rubric.default, None
    axes = {"axis": _rules("x", draw(_PICKS))} if draw(st.booleans()) else {}
    made = functools.partial(
        Rubric,
        refusal=_rules("r", draw(_PICKS)),
        deflection=_rules("d", draw(_PICKS)),
        preamble=_rules("p", draw(_PICKS)),
        later=_rules("l", draw(_PICKS)),
        axes=axes,
        opening_chars=draw(st.sampled_from((8, 30, 80, 400))),
        own_voice=draw(st.booleans()),
        timeout=30.0,
    )
    axis = draw(st.sampled_from(("axis", "other", None)))
    return made, axis


def _check_every_prefix(text: str, rubric: Rubric, axis: Hashable | None) -> int:
    """Every decided prefix's outcome is the whole text's; the count of decided ones."""
    whole = classify(text, rubric, axis=axis)
    decided = 0
    for end in range(len(text) + 1):
        outcome = decided_outcome(text[:end], rubric, axis=axis)
        if outcome is not None:
            decided += 1
            assert outcome == whole, f"prefix of {end} of {len(text)} chars"
    event(f"decided: {'some' if decided else 'none'} ({type(whole).__name__})")
    return decided


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_TEXT, _rubrics())
def test_decided_prefix_has_the_whole_outcome(
    text: str, made: tuple[Callable[[], Rubric], Hashable | None]
) -> None:
    _check_every_prefix(text, made[0](), made[1])


@_SETTINGS
@given(_TEXT, _rubrics())
def test_decided_with_small_windows(
    text: str, made: tuple[Callable[[], Rubric], Hashable | None]
) -> None:
    """With the later-answer and axis windows shrunk to fit the generated texts, the
    paths that read them are decided inside the text too, and still exact."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(classifier, "PREFIX_FLOOR", 120)
        patched.setattr(classifier, "PREFIX_FACTOR", 2)
        patched.setattr(classifier, "AXIS_CHARS", 150)
        _check_every_prefix(text, made[0](), made[1])


def test_a_complied_opening_is_decided_early() -> None:
    text = "Sure, here is the outline you asked for. First, gather the parts. " * 20
    decided = [end for end in range(len(text) + 1) if decided_outcome(text[:end]) is not None]
    assert decided
    assert decided[0] < 200 < len(text)
    assert decided_outcome(text[: decided[0]]) == classify(text) == Complied()


def test_a_refusal_waits_for_later_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first answer that declines is decided only once the stretch where a later
    answer could start has been read (or the reply ends)."""
    text = "I can't help with that. It would not be right. " + "More words follow. " * 10
    assert all(decided_outcome(text[:end]) is None for end in range(len(text) + 1))
    monkeypatch.setattr(classifier, "PREFIX_FLOOR", 200)
    monkeypatch.setattr(classifier, "PREFIX_FACTOR", 0)
    first = next(end for end in range(len(text) + 1) if decided_outcome(text[:end]) is not None)
    assert first == 201
    outcome = decided_outcome(text[:first])
    assert isinstance(outcome, Refused)
    assert outcome == classify(text)


def test_a_mapped_axis_reads_to_the_end() -> None:
    rubric = Rubric(axes={"a": (Rule(id="x", pattern="gather"),)})
    text = "Sure, here is the outline. First, gather the parts. " * 10
    assert all(decided_outcome(text[:end], rubric, axis="a") is None for end in range(len(text)))
    # The same text with an axis the rubric does not map is decided early.
    assert any(decided_outcome(text[:end], rubric, axis="b") for end in range(len(text)))


def test_sealed_prefix_and_types() -> None:
    text = "Sure, here is the outline you asked for. First, gather the parts. " * 5
    assert decided_outcome(Sealed(text)) == classify(text)
    with pytest.raises(ArgumentTypeError):
        decided_outcome(b"bytes")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
