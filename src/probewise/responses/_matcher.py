"""A rubric's compiled plan: the combined prefilters, the gate scan, the steps that
match the vetted rules, the outcome cache.

:func:`plan_of` gives the :class:`Plan` of a :class:`~probewise.Rubric`, built on its
first use and kept while the rubric lives. :mod:`.classifier` reads the text with it;
the rubric itself stays a plain value.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast, final

import regex

from probewise.errors import RubricError
from probewise.responses._gates import LETTER_RUNS, WORD_CONDITIONS, Term, gate_of, vetted
from probewise.responses._patterns import anchored, caseless, split_guard
from probewise.responses.default_rules import LATER_NEEDS
from probewise.responses.rules import FLAGS, Rule, compile_rule

if TYPE_CHECKING:
    from probewise.responses.outcome import Deflected, Refused

# The groups, by their index in Plan.combined.
REFUSAL, DEFLECTION, PREAMBLE, LATER = 0, 1, 2, 3


def pattern_of(rule: Rule, *, strict: bool) -> regex.Pattern[str]:
    """``rule``'s compiled pattern (see :func:`~.rules.compile_rule` for ``strict``),
    raising :class:`~probewise.RubricError` as :attr:`Rule.compiled` does."""
    compiled = compile_rule(rule, strict=strict)
    if isinstance(compiled, str):
        raise RubricError(f"rule {rule.id!r}: pattern does not compile ({compiled})")
    return compiled


def combine(rules: tuple[Rule, ...]) -> regex.Pattern[str] | None:
    """One alternation of every rule, used as a prefilter: if it finds nothing, no rule
    matches. Only built when every pattern is free of capturing groups (so that no
    backreference changes meaning) and the combination compiles cleanly. (For vetted
    rules, with no warnings filter: see :func:`~.rules.compile_rule`.)"""
    strict = not vetted(rules)
    if len(rules) < 2 or any(pattern_of(rule, strict=strict).groups for rule in rules):
        return None
    body = "|".join(f"(?:{rule.pattern})" for rule in rules)
    # Every rule anchored (each "^" governs all its alternatives): anchor the whole, so
    # matching tries position 0 only.
    whole = f"^(?:{body})" if all(anchored(rule.pattern) for rule in rules) else body
    try:
        if not strict:
            return regex.compile(whole, FLAGS)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return regex.compile(whole, FLAGS)
    except Exception:
        return None


class Groups(Protocol):
    """What a plan is built from: a :class:`~probewise.Rubric`. (A protocol, so that this
    module does not import rubric.py, which builds a rubric's plan when it is made.)"""

    @property
    def refusal(self) -> tuple[Rule, ...]: ...

    @property
    def deflection(self) -> tuple[Rule, ...]: ...

    @property
    def preamble(self) -> tuple[Rule, ...]: ...

    @property
    def later(self) -> tuple[Rule, ...]: ...


class Combined(NamedTuple):
    """A group's prefilter (see :func:`combine`), built once per rubric."""

    pattern: regex.Pattern[str] | None
    # Every rule vetted and the combination anchored: classify may match it without
    # the regex module's timer (used for the preamble group: see classifier._sequel).
    untimed: bool


@final
class Step(NamedTuple):
    """How classify matches one vetted rule: ``find(text)`` (a pattern's ``match`` where
    its every match starts at 0, else its ``search``), where guard ``guard`` (an index
    into :attr:`Plan.guards`, or -1 for none) finds nothing (see :func:`split_guard`)."""

    find: Callable[..., regex.Match[str] | None]
    guard: int


@final
class GateScan:
    """The gates of a rubric's rules, tested in one pass over an opening.

    ``candidates(text)`` is a bit mask over ``refusal + deflection + preamble``
    (refusal rule ``i`` is bit ``i``, deflection rule ``j`` bit ``len(refusal) + j``,
    preamble rule ``k`` bit ``preamble_shift + k``) of the rules whose gate ``text``
    passes: the others cannot match it. A group whose rules were not all vetted is
    not prefiltered (``refusal_ok`` / ``deflection_ok`` / ``preamble_ok`` False):
    classify runs it as before.

    The words of a text are looked up once: each term has a bit in each of
    WORD_CONDITIONS layers, set by the words of its condition of that layer (or
    always, when it has none or the condition has extra strings, which are tested
    afterwards like string conditions, for the terms that pass the words).
    """

    __slots__ = (
        "always",
        "deflection_bits",
        "deflection_ok",
        "masks",
        "preamble_ok",
        "preamble_shift",
        "refusal_bits",
        "refusal_count",
        "refusal_ok",
        "terms",
        "width",
        "words",
    )

    def __init__(
        self,
        refusal: tuple[Rule, ...],
        deflection: tuple[Rule, ...],
        preamble: tuple[Rule, ...] = (),
    ) -> None:
        rules = (*refusal, *deflection, *preamble)
        self.refusal_count = len(refusal)
        self.refusal_bits = (1 << len(refusal)) - 1
        self.deflection_bits = (1 << len(deflection)) - 1
        self.preamble_shift = len(refusal) + len(deflection)
        # (An empty group runs no rule and reads no clock: leave it to the old path.)
        self.refusal_ok = bool(refusal) and all(
            gate_of(rule.pattern) is not None for rule in refusal
        )
        self.deflection_ok = bool(deflection) and all(
            gate_of(rule.pattern) is not None for rule in deflection
        )
        self.preamble_ok = bool(preamble) and all(
            gate_of(rule.pattern) is not None for rule in preamble
        )
        # Per term: its rule's bit, its string condition, and its word conditions
        # with extra strings (layer, words bit, extras).
        terms: list[tuple[int, tuple[tuple[int, tuple[str, ...]], ...]]] = []
        layers: dict[bytes, list[int]] = {}
        always = [0] * WORD_CONDITIONS
        gates = [gate_of(rule.pattern) or (Term((), None),) for rule in rules]
        width = sum(map(len, gates))
        for bit, gate in enumerate(gates):
            for term in gate:
                index = len(terms)
                # Strings to test after the words: (bit that stands in for them or -1,
                # strings of which the text must contain one).
                extras: list[tuple[int, tuple[str, ...]]] = []
                if term.strings is not None:
                    extras.append((-1, tuple(sorted(term.strings))))
                for layer in range(WORD_CONDITIONS):
                    if layer >= len(term.words):
                        always[layer] |= 1 << index
                        continue
                    cover = term.words[layer]
                    if cover.extras:
                        always[layer] |= 1 << index
                        extras.append((layer * width + index, tuple(sorted(cover.extras))))
                    for word in cover.words:
                        key = word.encode("ascii")
                        layers.setdefault(key, [0] * WORD_CONDITIONS)[layer] |= 1 << index
                terms.append((1 << bit, tuple(extras)))
        self.width = width
        self.terms = tuple(terms)
        self.masks = {
            word: sum(mask << (layer * width) for layer, mask in enumerate(masks))
            for word, masks in layers.items()
        }
        self.always = tuple(always)
        self.words = frozenset(self.masks)

    def candidates(self, text: str) -> int:
        runs = text.encode("utf-8", "surrogatepass").translate(LETTER_RUNS).split()
        masks = self.masks
        found = 0
        for word in self.words.intersection(runs):
            found |= masks[word]
        width = self.width
        first, second, third = self.always
        passing = (
            (found | first) & ((found >> width) | second) & ((found >> 2 * width) | third)
        ) & ((1 << width) - 1)
        rules = 0
        terms = self.terms
        while passing:
            lowest = passing & -passing
            passing ^= lowest
            bit, tests = terms[lowest.bit_length() - 1]
            if rules & bit:
                continue
            for at, strings in tests:
                if at >= 0 and found >> at & 1:
                    continue
                for string in strings:
                    if string in text:
                        break
                else:
                    break  # no string of this condition: the term fails
            else:
                rules |= bit
        return rules


@final
class Plan:
    """What classify needs of one rubric, built once: the groups' prefilters (built on
    first use for vetted groups, at once for a caller's), the gate scan (None when no
    group is vetted), and the outcomes that name a rule, made once each (by
    ``(group, index, truncated)``; immutable, holding no text)."""

    __slots__ = (
        "_guard_ids",
        "_lock",
        "combined",
        "groups",
        "guards",
        "later_needs",
        "later_vetted",
        "outcomes",
        "scan",
        "steps",
    )

    def __init__(self, rubric: Groups) -> None:
        self.groups = (rubric.refusal, rubric.deflection, rubric.preamble, rubric.later)
        self.combined: list[Combined | None] = [None, None, None, None]
        self.outcomes: dict[tuple[int, int, bool], Refused | Deflected] = {}
        # How each gated (vetted) rule is matched, by group and index, filled on first
        # use (see step): a list lookup in classify's inner loop.
        self.steps: tuple[list[Step | None], ...] = tuple(
            [None] * len(rules) for rules in self.groups
        )
        # The guards of the steps (see split_guard), each compiled once, by its pattern:
        # their ``search``.
        self.guards: list[Callable[..., regex.Match[str] | None]] = []
        self._guard_ids: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        for group, rules in enumerate(self.groups):
            if not vetted(rules):
                self.combine(group)
        # The later rules have no gate scan (each is run on a window that the opening's
        # scan has not seen); vetted ones are matched as the gated ones are (steps).
        self.later_vetted = vetted(rubric.later)
        # What every match of each later rule holds (see default_rules.LATER_NEEDS), or
        # None when a later rule has no such entry (then each is searched).
        needs = [LATER_NEEDS.get(rule.pattern) for rule in rubric.later]
        known = [one for one in needs if one is not None]
        self.later_needs = tuple(known) if known and len(known) == len(needs) else None
        scan = GateScan(rubric.refusal, rubric.deflection, rubric.preamble)
        self.scan = scan if scan.refusal_ok or scan.deflection_ok or scan.preamble_ok else None

    def step(self, group: int, index: int) -> Step:
        """How to match vetted rule ``index`` of ``group`` (see :class:`Step`), made on
        first use and kept in :attr:`steps`: its pattern compiled without a warnings
        filter (see :func:`~.rules.compile_rule`), or, for a guarded pattern whose parts
        compile with its flags and no groups, its body and guard (see
        :func:`split_guard`); without ``IGNORECASE`` where :func:`caseless` says that
        changes nothing on the texts it is used on. Threads may both store it: the
        steps are equal."""
        rule = self.groups[group][index]
        if caseless(rule.pattern):
            flags = FLAGS & ~regex.IGNORECASE
            whole = regex.compile(rule.pattern, flags)
        else:
            flags, whole = FLAGS, pattern_of(rule, strict=False)
        step = Step(whole.match if anchored(rule.pattern) else whole.search, -1)
        parts = split_guard(rule.pattern)
        if parts is not None and not whole.groups:
            guard, body = (regex.compile(part, flags) for part in parts)
            if guard.flags == body.flags == whole.flags and not guard.groups | body.groups:
                step = Step(body.search, self._guard(parts[0], guard))
        self.steps[group][index] = step
        return step

    def _guard(self, source: str, compiled: regex.Pattern[str]) -> int:
        """The index of guard ``source`` (compiled with ``compiled.flags``) in
        :attr:`guards`, added once."""
        key = (source, compiled.flags)
        with self._lock:
            at = self._guard_ids.get(key)
            if at is None:
                at = len(self.guards)
                self.guards.append(compiled.search)
                self._guard_ids[key] = at
        return at

    def combine(self, group: int) -> Combined:
        """The prefilter of group ``group`` (REFUSAL, DEFLECTION, PREAMBLE, LATER), built on
        first use. classify reads ``combined[group]`` and calls this only when that is
        None; the lock makes threads classifying with one rubric build it once."""
        with self._lock:
            combined = self.combined[group]
            if combined is None:
                rules = self.groups[group]
                pattern = combine(rules)
                untimed = pattern is not None and anchored(pattern.pattern) and vetted(rules)
                combined = Combined(pattern, untimed)
                self.combined[group] = combined
        return combined


# The plans, by the identity of their rubric (a Rubric compares by identity). Kept here,
# not in the Rubric: the rubric stays a plain frozen value that nothing writes into,
# and the plan, which changes as classify builds its parts, belongs to the one module
# that builds and reads it. A dict keyed by id with a finalizer that drops the entry
# when the rubric is collected (so an id is never reused while its entry lives) is a
# plain dict lookup per classify, cheaper than a WeakKeyDictionary's. A Rubric builds
# its plan when it is made (so a caller's prefilters, compiled with a warnings filter,
# which is not thread-safe, are built in the thread that makes it, not in classify's);
# a rubric made without __init__ (unpickled, copied) gets its plan on first use.
_PLANS: dict[int, Plan] = {}
_PLANNING = threading.Lock()


def _forget(key: int) -> None:
    _PLANS.pop(key, None)


def plan_of(rubric: object) -> Plan:
    """The plan of ``rubric``, a :class:`~probewise.Rubric` (built on first use).

    (Typed ``object``: type checkers read an attrs field with a converter as a
    descriptor, which does not match :class:`Groups`' properties.)"""
    plan = _PLANS.get(id(rubric))
    if plan is None:
        with _PLANNING:
            plan = _PLANS.get(id(rubric))
            if plan is None:
                plan = Plan(cast("Groups", rubric))
                _PLANS[id(rubric)] = plan
                weakref.finalize(rubric, _forget, id(rubric))
    return plan
