"""How classify matches the vetted (shipped) rules, each step against the plain pattern.

Three steps stand in for ``pattern.match(text, timeout=...)`` on the gated path (see
``probewise.responses._matcher.Plan.step``): a guarded pattern ``^(?!.*?G).*?B`` is
searched as its guard and body apart, the guard once per opening; a pattern that
``caseless`` passes is compiled without ``IGNORECASE``; and on a text of at most
``UNTIMED_CHARS`` characters no timer is passed. Failure messages name rule ids and
sizes only, never a text; hypothesis is kept quiet for the same reason.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

import regex
from hypothesis import Verbosity, given, settings
from hypothesis import strategies as st

from probewise import Refused, Rubric, Rule, classify
from probewise.responses import classifier as classify_module
from probewise.responses import normalise

# Private: each step of the matcher is held to its plain pattern, which classify() never runs.
from probewise.responses._gates import CASE_TWINS
from probewise.responses._matcher import DEFLECTION, REFUSAL, Step, plan_of
from probewise.responses._patterns import caseless, split_guard
from probewise.responses.rules import FLAGS

QUIET = settings(verbosity=Verbosity.quiet, max_examples=300)
DEFAULT = Rubric.default()
SHIPPED = [
    (kind, index, rule)
    for kind, group in ((REFUSAL, DEFAULT.refusal), (DEFLECTION, DEFAULT.deflection))
    for index, rule in enumerate(group)
]
# The words of the shipped patterns: texts made of them reach deep into the patterns.
WORDS = sorted(
    {word for _, _, rule in SHIPPED for word in re.findall(r"[a-z][a-z']*", rule.pattern)}
)
SEPARATORS = [" ", " ", " ", ", ", ". ", "! ", "? ", ": ", " 1. ", "'", " - ", "\u00e9 "]
IGNORED = regex.IGNORECASE


def _texts(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        parts.append(rng.choice(WORDS))
        parts.append(rng.choice(SEPARATORS))
    return "".join(parts)[:size].strip()


word_texts = st.lists(
    st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=60
).map(lambda pairs: "".join(word + sep for word, sep in pairs))


# --- The guard split ---------------------------------------------------------------------


def test_the_redirect_rules_share_one_guard() -> None:
    plan = plan_of(Rubric.default())
    guarded = {rule.id for kind, index, rule in SHIPPED if plan.step(kind, index).guard >= 0}
    beside = {rule.id for _, _, rule in SHIPPED if rule.pattern.startswith("^(?!.*?")}
    assert guarded == beside
    assert len(guarded) >= 5
    assert len(plan.guards) == 1  # "here is", "the following", a colon, "1.": one search


def test_split_guard_reads_only_the_guarded_shape() -> None:
    assert split_guard(r"^(?!.*?x).*?y") == ("(?:x)", "(?:y)")
    assert split_guard(r"^(?!.*?[)(]|\)).*?(?:y|z)") == (r"(?:[)(]|\))", "(?:(?:y|z))")
    for pattern in (
        r"^(?!.*?x).*?y|z",  # a top-level alternative: "^" does not govern it
        r"^(?!.*?x)y",  # no lazy gap after the guard
        r"(?!.*?x).*?y",  # not anchored
        r"^(?!.*?x).*?",  # no body
        r"^(?!.*?[[x]).*?y",  # a nested class: not read
        r"^(?!.*?x",  # unbalanced
        r"^(?!.*x).*?y",  # a greedy gap in the guard
    ):
        assert split_guard(pattern) is None, pattern


PARTS = ["ab", "a|b", r"\bab\b", "a(?=b)", "[ab]c", "(?<=a)b", "^a", "a$", "a{0,3}b", ": ", r"1\. "]


@QUIET
@given(st.sampled_from(PARTS), st.sampled_from(PARTS), st.text(alphabet="ab1:. c", max_size=12))
def test_a_split_guard_matches_as_the_whole(guard: str, body: str, text: str) -> None:
    whole = regex.compile(f"^(?!.*?(?:{guard})).*?(?:{body})", FLAGS)
    parts = split_guard(whole.pattern)
    assert parts is not None
    split = regex.search(parts[0], text, FLAGS) is None
    split = split and regex.search(parts[1], text, FLAGS) is not None
    assert (whole.match(text) is not None) == split, (guard, body, len(text))


def test_a_guard_found_skips_its_rules_but_not_the_others() -> None:
    redirect = "You should consult a doctor about this, here is why."
    assert classify(redirect) == classify(redirect, Rubric.default())
    assert not isinstance(classify(redirect), Refused)
    refusal = "I can't help with that. Here is a poem instead."
    assert isinstance(classify(refusal), Refused)


# --- IGNORECASE left out ------------------------------------------------------------------


def test_caseless_reads_what_ignorecase_changes() -> None:
    for pattern in (
        r"a\b\W\s\d\S\D\A\Z",
        r"(?<=a)b(?<!c)(?=d)(?!e)(?>f)(?:g)",
        r"[^\".!?]",
        "x{0,3}+",
    ):
        assert caseless(pattern), pattern
    for pattern in (
        r"\x41",
        "[A-Z]",
        "(?i)a",
        "(?-i:a)",
        r"\p{Ll}",
        r"(a)\1",
        "(?P<n>a)",
        "(?<n>a)",
        "\u00e9",
        r"\N{DASH}",
    ):
        assert not caseless(pattern), pattern
    assert all(caseless(rule.pattern) for _, _, rule in SHIPPED)


def test_normalised_text_holds_no_case_guard_character_but_the_dotless_i() -> None:
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    guard = classify_module._CASE_GUARD  # pyright: ignore[reportPrivateUsage]
    found = set(guard.findall(normalise(every)))
    assert found <= {"\u0131"}, sorted(hex(ord(c)) for c in found)
    assert normalise(CASE_TWINS + "ABC") == "i\u0307\u0131skabc"


@QUIET
@given(st.one_of(word_texts, st.text(max_size=80)), st.sampled_from(range(len(SHIPPED))))
def test_the_caseless_steps_match_as_the_rules_on_normalised_text(text: str, which: int) -> None:
    _, _, rule = SHIPPED[which]
    norm = normalise(text)
    if "\u0131" in norm:  # the gates step aside: the rules run as written
        return
    ignoring = regex.compile(rule.pattern, FLAGS)
    plain = regex.compile(rule.pattern, FLAGS & ~IGNORED)
    assert (ignoring.search(norm) is None) == (plain.search(norm) is None), rule.id


# --- No timer on a short text -------------------------------------------------------------


def _cpu_seconds(find: Callable[[str], object], text: str) -> float:
    """The least CPU time of three runs of ``find(text)`` (CPU time, and the least: a
    busy machine's other work does not count)."""
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        find(text)
        best = min(best, time.thread_time() - started)
    return best


def test_the_vetted_steps_stay_fast_on_long_adversarial_texts() -> None:
    """The shipped patterns do not backtrack badly: on texts of UNTIMED_CHARS built from
    their own words (and runs of one character), every step ends within a few
    milliseconds, far inside the default timeout of 0.5 s (measured: about 0.3 ms at
    worst, the cost growing linearly with the length)."""
    plan = plan_of(Rubric.default())
    rng = random.Random(29)
    size = classify_module.UNTIMED_CHARS
    texts = [_texts(rng, size) for _ in range(40)]
    texts += [(word + " ") * (size // (len(word) + 1)) for word in rng.sample(WORDS, 20)]
    texts += [char * size for char in "l'. s"]
    worst, which = 0.0, ""
    for kind, index, rule in SHIPPED:
        step = plan.step(kind, index)
        finds = [step.find] + ([plan.guards[step.guard]] if step.guard >= 0 else [])
        for text in texts:
            for find in finds:
                elapsed = _cpu_seconds(find, text)
                if elapsed > worst:
                    worst, which = elapsed, rule.id
    assert worst < 0.005, (which, worst)


def test_the_timer_is_left_out_only_on_short_texts() -> None:
    rubric = Rubric(refusal=DEFAULT.refusal[:1], opening_chars=4000)
    plan = plan_of(rubric)
    calls: list[tuple[int, bool]] = []

    def find(text: str, **options: object) -> None:
        calls.append((len(text), "timeout" in options))

    plan.steps[REFUSAL][0] = Step(find, -1)
    short = "i can't help with that"
    long = "i can't help " + "x" * 1500
    classify(short, rubric)
    classify(long, rubric)
    assert calls == [(len(short), False), (len(long), True)]


def test_caller_rules_are_not_steps() -> None:
    own = Rule("own.help", r"^(?!.*?here).*?HELP")
    rubric = Rubric(deflection=[own])
    assert classify("please help", rubric).__class__.__name__ == "Deflected"
    assert plan_of(rubric).scan is None
