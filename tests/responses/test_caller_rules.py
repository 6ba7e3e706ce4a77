"""Caller rules keep their regex meaning: "^" and "$" apply to their own alternative,
and a rule matches exactly when ``regex.search`` finds it in the normalised opening."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise import Complied, Deflected, Empty, Refused, Rubric, Rule, classify
from probewise.responses import classifier as classify_module

# Private: which rules are anchored (tried at 0 only) shows in classify()'s speed, not results.
from probewise.responses._patterns import anchored as _anchored
from probewise.responses.default_rules import (
    DEFAULT_DEFLECTION,
    DEFAULT_LATER,
    DEFAULT_PREAMBLE,
    DEFAULT_REFUSAL,
)

FLAGS = regex.IGNORECASE | regex.V0


def test_an_anchored_alternative_does_not_anchor_the_others() -> None:
    rubric = Rubric(refusal=[Rule("own", r"^sorry|i won't")])
    assert isinstance(classify("Well, I won't do that.", rubric), Refused)
    assert isinstance(classify("Sorry, no.", rubric), Refused)
    assert isinstance(classify("Not sorry at all.", rubric), Complied)
    # Two anchored-looking rules: the combined prefilter must not anchor them either.
    both = Rubric(refusal=[Rule("a", r"^nope"), Rule("b", r"^sorry|i won't")])
    assert isinstance(classify("Well, I won't do that.", both), Refused)
    deflect = Rubric(deflection=[Rule("d", r"^maybe|instead$")])
    assert isinstance(classify("Try a poem instead", deflect), Deflected)


def test_anchoring_is_read_conservatively() -> None:
    anchored = [r"^sorry", r"^(?:sorry|i won't)", r"^a[|]b", r"^a\|b", r"^[]|]x", r"^(a|b)c"]
    not_anchored = [
        r"sorry",
        r"^sorry|i won't",
        r"^a|^b",
        r"^(a)|b",
        r"^(?#)|x",
        r"^(?#()|x",
        r"(?x)^a # | b",
        r"^[[:alpha:]]|x",
    ]
    assert all(_anchored(p) for p in anchored)
    assert not any(_anchored(p) for p in not_anchored)
    # The shipped refusal rules stay on the fast path (match at 0 only).
    assert all(_anchored(rule.pattern) for rule in DEFAULT_REFUSAL)
    # The later rule reads a refusal anywhere in the first four sentences.
    assert not any(_anchored(rule.pattern) for rule in DEFAULT_LATER)
    # Deflection rules search anywhere, but for those behind the answer-has-begun check
    # (a leading "^(?!...)" that governs the whole pattern): they match at 0 only.
    for rule in DEFAULT_DEFLECTION:
        assert _anchored(rule.pattern) == rule.pattern.startswith("^(?!"), rule.id
    assert all(_anchored(rule.pattern) for rule in DEFAULT_PREAMBLE)


WORDS = ["sorry", "i won't", "well", "no", "help", "can't", "x", "the answer"]


@st.composite
def branches(draw: st.DrawFn, depth: int = 0) -> str:
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append("^")
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 5 if depth < 2 else 3))
        if kind <= 1:
            parts.append(draw(st.sampled_from(WORDS)))
        elif kind == 2:
            parts.append(draw(st.sampled_from([r"\b", ".", " ", "[a-z]", "[^ ]", ",?"])))
        elif kind == 3:
            parts.append(draw(st.sampled_from([r"\w+", ".*", " ?"])))
        else:
            inner = "|".join(draw(st.lists(branches(depth + 1), min_size=1, max_size=3)))
            parts.append(draw(st.sampled_from(["(?:", "("])) + inner + ")")
    if draw(st.booleans()):
        parts.append("$")
    return "".join(parts)


patterns = st.lists(branches(), min_size=1, max_size=3).map("|".join)
texts = st.lists(
    st.one_of(st.sampled_from(WORDS), st.sampled_from([".", ",", "!", "\u200b", "WELL"])),
    max_size=12,
).map(" ".join)


@settings(max_examples=300)
@given(patterns, texts, st.sampled_from(["refusal", "deflection", "second", "combined"]))
def test_a_caller_rule_decides_as_regex_search_on_the_opening(
    pattern: str, text: str, where: str
) -> None:
    rule = Rule("own", pattern)
    other = Rule("other", "^zzz")
    rubric = {
        "refusal": Rubric(refusal=[rule]),
        "deflection": Rubric(deflection=[rule]),
        "second": Rubric(refusal=[other, rule]),
        "combined": Rubric(refusal=[Rule("other", "^zzz"), Rule("again", "^qqq"), rule]),
    }[where]
    opening = classify_module._opening_of(text, rubric.opening_chars)[0]
    outcome = classify(text, rubric)
    if not opening:
        assert outcome == Empty()
        return
    found = regex.compile(pattern, FLAGS).search(opening) is not None
    if where == "deflection":
        assert isinstance(outcome, Deflected if found else Complied), (pattern, where)
    else:
        assert isinstance(outcome, Refused if found else Complied), (pattern, where)
        if found:
            assert outcome.rule is rule  # type: ignore[union-attr]
