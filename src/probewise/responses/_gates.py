"""Gates: regex -> word conditions, the prefilter of the shipped rules.

:func:`derive_gate` reads a pattern and derives its *gate* (see the notes below);
:func:`vet_shipped` records the gates of the shipped rules, by pattern
(a gate is a function of the pattern alone), where :func:`gate_of` finds them. The
shipped gates are derived at development time into ``_default_gates.json`` by
``scripts/build_gates.py``; :func:`vet_shipped` reads that file. :mod:`._matcher`
builds a rubric's scan from the gates.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import cast, final

import attrs

from probewise.responses.rules import Rule

# --- Gates: a prefilter for the shipped rules -----------------------------------------
#
# derive_gate(pattern) derives a *gate*: terms, one of which every text that the pattern
# matches satisfies. A term is a conjunction of conditions: "has a word of this set"
# (a word is a maximal run of the letters a-z, what LETTER_RUNS splits text into) or
# "contains one of these strings". classify() runs a shipped rule only on openings
# that pass its gate; caller rules have none. The derivation reads a subset of the
# regex syntax and gives up on anything outside it (no gate: the rule always runs),
# so it can be too cautious, never wrong. How:
#
# * each part of the pattern gets a finite set of *shapes*, strings that cover every
#   text the part can match: literal characters stand for themselves, "\x00" for a
#   word-boundary assertion (\b, ^, $, \A, \Z), "\x02" for one character that is not
#   a letter (\s, \d, \W, \n, ...) and "\x01" for a gap of any length that may hold
#   anything. Where a sequence's shapes would grow past _SHAPE_LIMIT, their middles
#   are folded into gaps (after their conditions were taken);
# * a letter run in a shape with a non-letter, "\x00" or "\x02" on both sides is a
#   whole word of every text that the shape covers; a set of shapes gives a word
#   condition when each shape has such a word, and a string condition when each has a
#   literal piece (between gaps and "\x02"; "\x00" takes no room). A word condition
#   may also accept, for a few shapes with no whole word, their pieces ("extras",
#   tested as strings after the words). Conditions of the parts of a sequence hold
#   at once; an alternation needs one of each branch, so it keeps their union; the
#   branches of a top-level alternation (and of groups in the top-level sequence)
#   become terms of their own;
# * literal ASCII letters are lowered: the prefilter runs only on text with no upper
#   case ASCII letter and none of CASE_TWINS, the non-ASCII characters that
#   ``regex.IGNORECASE`` pairs with an ASCII character (tested against the regex
#   module over every code point), so there a letter of the pattern matches only its
#   own lower-case form. A non-ASCII pattern character is a gap.

CASE_TWINS = "\u0130\u0131\u017f\u212a"
_BOUNDARY, _GAP, _NON_LETTER = "\x00", "\x01", "\x02"
_MARKS = (_BOUNDARY, _GAP, _NON_LETTER)
_SHAPE_LIMIT = 256
_CLASS_LIMIT = 8
# Terms per rule. A rule whose top-level alternation has more branches than this gets
# one term for all of them (the union of their conditions: loose), as
# deflection.change_subject's 13 did under the old limit of 12 (its gate passed any
# opening with "how" or "about"); 32 leaves every shipped rule its branches.
_TERM_LIMIT = 32
WORD_CONDITIONS = 3  # word conditions per term (the scan's layers)
_STRINGS_LIMIT = 8  # strings in a string condition worth testing
_EXTRAS_LIMIT = 4  # extra strings in a word condition
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")
_NON_LETTER_ESCAPES = frozenset("sdWntrfv")
_GAP_ESCAPES = frozenset("wSD")
_ZERO_WIDTH_ESCAPES = frozenset("bAZ")
# Frequent words make poor conditions (every text has them): prefer other words.
_COMMON_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "could",
        "do",
        "for",
        "from",
        "have",
        "i",
        "if",
        "in",
        "is",
        "it",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "s",
        "so",
        "t",
        "that",
        "the",
        "this",
        "to",
        "we",
        "will",
        "with",
        "would",
        "you",
        "your",
    }
)

_Shapes = frozenset[str]
_NOTHING: _Shapes = frozenset({""})
_NO_WORDS: frozenset[str] = frozenset()


@final
@attrs.frozen
class Cover:
    """A word condition: the text has one of ``words``, or contains one of ``extras``."""

    words: frozenset[str]
    extras: frozenset[str] = frozenset()


@final
@attrs.frozen
class Term:
    """Word conditions and an optional string condition (the text contains one of the
    strings), all required."""

    words: tuple[Cover, ...]
    strings: frozenset[str] | None


# The parsed pattern: ("shapes", shapes) for what consumes or asserts without
# alternatives, ("seq", items), ("alt", branches), ("rep", item, low, high).
_Node = tuple[object, ...]


class _Unsupported(Exception):
    """Raised by the gate parser for syntax it does not read."""


class _GateParser:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0

    def _peek(self) -> str:
        return self.pattern[self.at] if self.at < len(self.pattern) else ""

    def parse(self) -> _Node:
        node = self._alternation()
        if self.at != len(self.pattern):
            raise _Unsupported
        return node

    def _alternation(self) -> _Node:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self._sequence())
        return branches[0] if len(branches) == 1 else ("alt", tuple(branches))

    def _sequence(self) -> _Node:
        items: list[_Node] = []
        while self._peek() not in ("", "|", ")"):
            item = self._quantified()
            # Splice plain sub-sequences, so that their words see their neighbours.
            items.extend(cast("tuple[_Node, ...]", item[1]) if item[0] == "seq" else (item,))
        return ("seq", tuple(items))

    def _quantified(self) -> _Node:
        node = self._atom()
        bounds = self._quantifier()
        if bounds is None:
            return node
        if self._peek() in ("?", "+"):  # lazy or possessive: a subset of the matches
            self.at += 1
        if self._peek() in ("*", "+", "?", "{"):
            raise _Unsupported
        return ("rep", node, *bounds)

    def _quantifier(self) -> tuple[int, int | None] | None:
        char = self._peek()
        if char in ("?", "*", "+"):
            self.at += 1
            return {"?": (0, 1), "*": (0, None), "+": (1, None)}[char]
        if char != "{":
            return None
        close = self.pattern.find("}", self.at)
        body = self.pattern[self.at + 1 : close] if close != -1 else ""
        match = re.fullmatch(r"([0-9]*)(,?)([0-9]*)", body)
        if close == -1 or match is None or not (match[1] or match[3]):
            raise _Unsupported  # a literal "{", or something this parser does not read
        self.at = close + 1
        low = int(match[1]) if match[1] else 0
        if not match[2]:
            return low, low
        return low, (int(match[3]) if match[3] else None)

    def _atom(self) -> _Node:
        char = self._peek()
        if char == "(":
            return self._group()
        if char == "[":
            return ("shapes", self._class())
        if char == "\\":
            return ("shapes", self._escape())
        if char in ("*", "+", "?", "{", "}", "]", *_MARKS):
            raise _Unsupported
        self.at += 1
        if char in ("^", "$"):
            return ("shapes", frozenset({_BOUNDARY}))
        if char == "." or not char.isascii():
            return ("shapes", frozenset({_GAP}))
        return ("shapes", frozenset({char.lower()}))

    def _group(self) -> _Node:
        self.at += 1
        zero_width = False
        if self._peek() == "?":
            head = self.pattern[self.at : self.at + 3]
            if head[:2] in ("?:", "?>"):
                self.at += 2
            elif head[:2] in ("?=", "?!"):
                self.at += 2
                zero_width = True
            elif head in ("?<=", "?<!"):
                self.at += 3
                zero_width = True
            else:
                raise _Unsupported  # inline flags, named groups, conditionals, ...
        node = self._alternation()
        if self._peek() != ")":
            raise _Unsupported
        self.at += 1
        return ("shapes", _NOTHING) if zero_width else node

    def _escape(self) -> _Shapes:
        char = self.pattern[self.at + 1 : self.at + 2]
        self.at += 2
        if char == "B":
            return _NOTHING
        if char in _ZERO_WIDTH_ESCAPES:
            return frozenset({_BOUNDARY})
        if char in _NON_LETTER_ESCAPES:
            return frozenset({_NON_LETTER})
        if char in _GAP_ESCAPES:
            return frozenset({_GAP})
        if char and char.isascii() and not char.isalnum() and char not in _MARKS:
            return frozenset({char})
        raise _Unsupported  # back references, \p{...}, \x.., \N{...}, \G, ...

    def _class(self) -> _Shapes:
        self.at += 1
        plain = True
        if self._peek() == "^":
            self.at += 1
            plain = False
        if self._peek() == "]":
            raise _Unsupported
        chars: set[str] = set()
        while True:
            char = self._peek()
            if char in ("", "["):
                raise _Unsupported  # unterminated, or a POSIX class / nested set
            self.at += 1
            if char == "]":
                break
            if char == "\\":
                escaped = self._peek()
                self.at += 1
                if escaped in _NON_LETTER_ESCAPES or escaped in _GAP_ESCAPES:
                    plain = False
                elif escaped and escaped.isascii() and not escaped.isalnum():
                    chars.add(escaped)
                else:
                    raise _Unsupported
            elif char == "-" or not char.isascii() or char in _MARKS:
                plain = False
            else:
                chars.add(char.lower())
        if plain and 0 < len(chars) <= _CLASS_LIMIT:
            return frozenset(chars)
        return frozenset({_GAP})


def _tidy(shape: str) -> str:
    while _GAP + _GAP in shape:
        shape = shape.replace(_GAP + _GAP, _GAP)
    while _BOUNDARY + _BOUNDARY in shape:
        shape = shape.replace(_BOUNDARY + _BOUNDARY, _BOUNDARY)
    return shape


def _product(left: _Shapes, right: _Shapes) -> _Shapes:
    return frozenset(_tidy(a + b) for a in left for b in right)


def _edges(shape: str, keep: int | None) -> str:
    """``shape`` with its middle made a gap. Kept are its start up to its first letter
    and its end after its last letter, or, when it ends in a letter, its last letter
    run with the character before it (that word may still be completed by what
    follows); ``keep=1`` keeps only one character of each outer end."""
    letters = [i for i, char in enumerate(shape) if char in _LETTERS]
    if not letters:
        return shape if keep is None else _GAP
    if letters[-1] == len(shape) - 1:
        start = len(shape) - 1
        while start > 0 and shape[start - 1] in _LETTERS:
            start -= 1
        end = max(start - 1, 0)
    else:
        end = letters[-1] + 1
        if keep is not None:
            end = max(end, len(shape) - keep)
    head = min(letters[0], end, len(shape) if keep is None else keep)
    if head >= end:
        return shape  # no middle to fold
    return shape[:head] + _GAP + shape[end:]


def _fold(shapes: _Shapes, limit: int = _SHAPE_LIMIT // 4) -> _Shapes:
    """At most ``limit`` shapes covering at least the same texts: the middle of each
    (from its first letter to its last) becomes a gap, then more, down to one gap."""
    for keep in (None, 1):
        folded = frozenset(_tidy(_edges(shape, keep)) for shape in shapes)
        if len(folded) <= limit:
            return folded
    return frozenset({_GAP})


@functools.lru_cache(maxsize=8192)
def _whole_words(shape: str) -> frozenset[str]:
    """The letter runs of ``shape`` that are whole words of every text it covers."""
    words: set[str] = set()
    start = 0
    while start < len(shape):
        if shape[start] not in _LETTERS:
            start += 1
            continue
        end = start
        while end < len(shape) and shape[end] in _LETTERS:
            end += 1
        if start > 0 and end < len(shape) and _GAP not in (shape[start - 1], shape[end]):
            words.add(shape[start:end])
        start = end
    return frozenset(words)


def _longest_piece(shape: str) -> str:
    """The longest literal stretch of ``shape`` (a boundary takes no room)."""
    return max(re.split("[\x01\x02]", shape.replace(_BOUNDARY, "")), key=len)


def _minimal(strings: set[str] | frozenset[str]) -> frozenset[str]:
    """Without the strings that contain another one (that one is implied)."""
    return frozenset(s for s in strings if not any(t != s and t in s for t in strings))


def _word_covers(shapes: _Shapes) -> list[Cover]:
    """Disjoint word conditions that every shape meets: each shape has one of the
    words, or (at most _EXTRAS_LIMIT shapes, with no such word) contains one of the
    extra strings. Words are chosen greedily, few and uncommon first."""
    by_words: dict[frozenset[str], list[str]] = {}
    for shape in shapes:
        by_words.setdefault(_whole_words(shape), []).append(shape)
    covers: list[Cover] = []
    used: frozenset[str] = frozenset()
    while len(covers) < WORD_CONDITIONS:
        bare = {
            _longest_piece(shape)
            for words, group in by_words.items()
            if words <= used
            for shape in group
        }
        if len(bare) > 4 * _EXTRAS_LIMIT:
            break
        extras = _minimal(bare)
        if len(extras) > _EXTRAS_LIMIT or any(len(s) < 4 for s in extras):
            break
        usable: set[frozenset[str]] = {words - used for words in by_words} - {_NO_WORDS}
        if not usable:
            break
        chosen: set[str] = set()
        left: list[frozenset[str]] = list(usable)
        while left:
            counts: Counter[str] = Counter(word for words in left for word in words)
            word = max(counts, key=lambda w: (w not in _COMMON_WORDS, counts[w], w))
            chosen.add(word)
            left = [words for words in left if word not in words]
        # Drop words that others already stand in for (fewer words: a sharper filter).
        counts = Counter[str](word for words in usable for word in words & chosen)
        for word in sorted(chosen, key=lambda w: (counts[w], w)):
            rest = chosen - {word}
            if all(not words.isdisjoint(rest) for words in usable):
                chosen = rest
        covers.append(Cover(frozenset(chosen), extras))
        used = used | chosen
    return covers


def _string_cover(shapes: _Shapes) -> frozenset[str] | None:
    """Strings, at least one inside each shape (the longest piece of each), or None."""
    pieces = {_longest_piece(shape) for shape in shapes}
    if "" in pieces or len(pieces) > 4 * _STRINGS_LIMIT:
        return None  # none, or too many to be worth testing
    return _minimal(pieces)


def _cover_rank(cover: Cover) -> tuple[int, int, int, int]:
    words = cover.words
    shortest = min(4, *map(len, words)) if words else 4
    return -len(words & _COMMON_WORDS), -len(cover.extras), shortest, -len(words)


def _strings_rank(strings: frozenset[str]) -> tuple[int, int]:
    return min(8, *map(len, strings)), -len(strings)


@final
class _Facts:
    """What a part of a pattern is known to need: its shapes, and word and string
    conditions that each of its matches meets."""

    __slots__ = ("_covers", "shapes", "strings", "words")

    def __init__(
        self,
        shapes: _Shapes,
        words: tuple[Cover, ...] = (),
        strings: tuple[frozenset[str], ...] = (),
    ) -> None:
        self.shapes = shapes
        self.words = words
        self.strings = strings
        self._covers: list[Cover] | None = None

    def covers(self) -> list[Cover]:
        if self._covers is None:
            self._covers = _word_covers(self.shapes)
        return self._covers

    def best_words(self) -> Cover | None:
        options = [*self.words, *self.covers()[:1]]
        return max(options, key=_cover_rank) if options else None

    def best_strings(self) -> frozenset[str] | None:
        cover = _string_cover(self.shapes)
        options = [*self.strings, *((cover,) if cover else ())]
        return max(options, key=_strings_rank) if options else None


class _Analysis:
    """The facts of the parts of parsed patterns, each part (by value: the shipped
    rules share theirs) worked out once."""

    def __init__(self) -> None:
        self._seen: dict[_Node, _Facts] = {}
        self._sequences: dict[tuple[_Node, ...], _Facts] = {}

    def facts(self, node: _Node) -> _Facts:
        known = self._seen.get(node)
        if known is None:
            known = self._seen[node] = self._work_out(node)
        return known

    def _work_out(self, node: _Node) -> _Facts:
        kind = node[0]
        if kind == "shapes":
            return _Facts(cast("_Shapes", node[1]))
        if kind == "seq":
            return self.sequence(cast("tuple[_Node, ...]", node[1]))
        if kind == "alt":
            return self._alternation(cast("tuple[_Node, ...]", node[1]))
        return self._repeat(
            cast("_Node", node[1]), cast("int", node[2]), cast("int | None", node[3])
        )

    def _alternation(self, branches: tuple[_Node, ...]) -> _Facts:
        facts = [self.facts(branch) for branch in branches]
        shapes = frozenset(s for branch in facts for s in branch.shapes)
        if len(shapes) > _SHAPE_LIMIT:
            shapes = _fold(shapes)
        # A match is a match of one branch: it meets that branch's condition.
        per_words = [branch.best_words() for branch in facts]
        words: tuple[Cover, ...] = ()
        if all(per_words):
            merged = Cover(
                frozenset(w for c in per_words if c for w in c.words),
                _minimal({s for c in per_words if c for s in c.extras}),
            )
            if len(merged.extras) <= _EXTRAS_LIMIT:
                words = (merged,)
        per_strings = [branch.best_strings() for branch in facts]
        strings: tuple[frozenset[str], ...] = ()
        union = {s for group in per_strings if group for s in group}
        if all(per_strings) and len(union) <= 4 * _STRINGS_LIMIT:
            strings = (_minimal(union),)
        return _Facts(shapes, words, strings)

    def _repeat(self, node: _Node, low: int, high: int | None) -> _Facts:
        if high is not None and high < low:
            raise _Unsupported
        if high == 0:
            return _Facts(_NOTHING)
        child = self.facts(node)
        if low == high == 1:
            return child
        covered: set[str] = set()
        if low == 0:
            covered.add("")
        if low <= 1:
            covered.update(child.shapes)
        if high is None or high >= 2:
            # Two or more copies: the first one's edges, a gap, the last one's edges.
            ends = _fold(child.shapes)
            covered.update(_product(_product(ends, frozenset({_GAP})), ends))
        shapes = frozenset(covered)
        if len(shapes) > _SHAPE_LIMIT:
            shapes = _fold(shapes)
        if low == 0:
            return _Facts(shapes)
        # Every copy meets the child's conditions, so one copy or more does too.
        own_words = child.best_words()
        own_strings = child.best_strings()
        return _Facts(
            shapes,
            (*child.words, *((own_words,) if own_words else ())),
            (*child.strings, *((own_strings,) if own_strings else ())),
        )

    def sequence(self, items: tuple[_Node, ...]) -> _Facts:
        known = self._sequences.get(items)
        if known is None:
            known = self._sequences[items] = self._sequence(items)
        return known

    def _sequence(self, items: tuple[_Node, ...]) -> _Facts:
        run: _Shapes = _NOTHING
        words: list[Cover] = []
        strings: list[frozenset[str]] = []
        for item in items:
            facts = self.facts(item)
            words.extend(facts.words)
            strings.extend(facts.strings)
            shapes = facts.shapes
            if len(run) * len(shapes) > _SHAPE_LIMIT:
                # Too many shapes: take the conditions of what came before, then fold
                # it (first: the new part's words still need their neighbours).
                words.extend(_word_covers(run))
                cover = _string_cover(run)
                if cover:
                    strings.append(cover)
                # The new part is folded only past half the limit (the run before it
                # folds to the rest): a list of 67 words (deflection.professional's
                # professions) folded at a quarter came out one gap, its words lost.
                if len(shapes) > _SHAPE_LIMIT // 2:
                    shapes = _fold(shapes, _SHAPE_LIMIT // 2)
                run = _fold(run, max(1, _SHAPE_LIMIT // len(shapes)))
            run = _product(run, shapes)
        return _Facts(run, tuple(words), tuple(strings))


def _items(node: _Node) -> tuple[_Node, ...]:
    return cast("tuple[_Node, ...]", node[1]) if node[0] == "seq" else (node,)


def _variants(node: _Node) -> list[tuple[_Node, ...]]:
    """The top-level alternatives of ``node`` as flat sequences: the branches of a
    top-level alternation, and of alternations in the top-level sequence (while there
    are at most _TERM_LIMIT)."""
    branches = cast("tuple[_Node, ...]", node[1]) if node[0] == "alt" else (node,)
    variants: list[tuple[_Node, ...]] = []
    for number, branch in enumerate(branches, start=1):
        # Leave one term for each branch still to come.
        budget = _TERM_LIMIT - len(variants) - (len(branches) - number)
        expanded: list[tuple[_Node, ...]] = [()]
        for item in _items(branch):
            options = cast("tuple[_Node, ...]", item[1]) if item[0] == "alt" else ()
            if options and len(expanded) * len(options) <= budget:
                expanded = [(*done, *_items(o)) for done in expanded for o in options]
            else:
                expanded = [(*done, item) for done in expanded]
        variants.extend(expanded)
    return variants


def _term(analysis: _Analysis, items: tuple[_Node, ...]) -> Term:
    facts = analysis.sequence(items)
    covers = sorted({*facts.words, *facts.covers()}, key=_cover_rank, reverse=True)
    strings = facts.best_strings()
    if strings is not None and (len(strings) > _STRINGS_LIMIT or min(map(len, strings)) < 4):
        strings = None
    return Term(tuple(covers[:WORD_CONDITIONS]), strings)


def derive_gate(pattern: str, analysis: _Analysis | None = None) -> tuple[Term, ...] | None:
    """Terms of which every normalised text that ``pattern`` matches satisfies one (see
    above), or None when the syntax is outside what this reads."""
    try:
        node = _GateParser(pattern).parse()
        analysis = analysis or _Analysis()
        variants = _variants(node)
        if len(variants) > _TERM_LIMIT:
            variants = [_items(node)]
        return tuple(_term(analysis, items) for items in variants)
    except (_Unsupported, RecursionError):
        return None


# A text's letter runs: its UTF-8 bytes, every byte other than a-z made a space, split.
# Bytes of non-ASCII characters are all 0x80 and over, so they separate runs too.
LETTER_RUNS = bytes(byte if 0x61 <= byte <= 0x7A else 0x20 for byte in range(256))


Gate = tuple["Term", ...]
"""A rule's gate: terms, one of which every text that its pattern matches satisfies."""

# The gates of the vetted (shipped) patterns, by pattern. A pattern with a gate is
# vetted: it compiles without a warnings filter and its rule runs only on openings that
# pass its gate; a caller's pattern has none (unless it is a shipped pattern: its gate,
# derived from the pattern alone, holds for it as well). Filled by vet_shipped (and by tests that vet rules of their own);
# the shipped rules' on the first gate_of (ensure_shipped).
_GATES: dict[str, Gate] = {}
_SHIPPED_LOCK = threading.Lock()
_SHIPPED_DONE: list[bool] = []


def derived_gates(rules: Iterable[Rule]) -> dict[str, Gate]:
    """The gates of ``rules``' patterns, derived afresh. (One analysis for all of them:
    they share parts.) A pattern the gate parser does not read gets a gate that every
    text passes."""
    analysis = _Analysis()
    gates: dict[str, Gate] = {}
    for rule in rules:
        gate = derive_gate(rule.pattern, analysis)
        gates[rule.pattern] = gate if gate is not None else (Term((), None),)
    _whole_words.cache_clear()
    return gates


# --- Shipped gates: derived at development time ---------------------------------------
#
# Deriving the shipped rules' gates takes a few tenths of a second, which every process
# paid on its first Rubric.default(). scripts/build_gates.py derives them once, with
# derived_gates' analysis, into SHIPPED_GATES (keyed by pattern, canonical and sorted, so the
# file is a pure function of the patterns); vet_shipped reads it. A rule whose pattern
# the file does not hold (the file is stale: a pattern changed since it was built) gets
# its gate derived as before, so a stale file costs time, never soundness; the test
# tests/responses/test_shipped_gates.py fails until the script is rerun.

SHIPPED_GATES = "_default_gates.json"
_GATES_FORMAT = 1


def term_data(term: Term) -> dict[str, object]:
    """A term as JSON data."""
    # A term's word conditions all hold at once: their order is not part of its meaning
    # (the derivation's order can vary with string hashing), so they are sorted here.
    covers = sorted([sorted(cover.words), sorted(cover.extras)] for cover in term.words)
    strings = None if term.strings is None else sorted(term.strings)
    return {"words": covers, "strings": strings}


def _term_of(data: Mapping[str, object]) -> Term:
    covers = cast("list[list[list[str]]]", data["words"])
    strings = cast("list[str] | None", data["strings"])
    return Term(
        tuple(Cover(frozenset(words), frozenset(extras)) for words, extras in covers),
        None if strings is None else frozenset(strings),
    )


def gates_document(rules: Iterable[Rule]) -> str:
    """The text of :data:`SHIPPED_GATES` for ``rules``: their gates derived afresh."""
    derived = derived_gates(rules)
    gates = {pattern: [term_data(term) for term in gate] for pattern, gate in derived.items()}
    document = {
        "format": _GATES_FORMAT,
        "generated_by": "scripts/build_gates.py (do not edit; rerun it after changing a rule)",
        "gates": gates,
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def shipped_gates(rules: Iterable[Rule]) -> dict[str, Gate]:
    """The gates of ``rules``' patterns: read from :data:`SHIPPED_GATES` where it holds the
    pattern, derived (as :func:`derived_gates` does) where it does not."""
    try:
        text = importlib.resources.files(__package__ or "").joinpath(SHIPPED_GATES).read_text()
        document = cast("dict[str, object]", json.loads(text))
        stored = cast("dict[str, list[dict[str, object]]]", document["gates"])
        if document.get("format") != _GATES_FORMAT:
            stored = {}
    except (OSError, ValueError, KeyError, TypeError):  # missing or damaged: derive them all
        stored = {}
    gates: dict[str, Gate] = {}
    missing: list[Rule] = []
    for rule in rules:
        terms = stored.get(rule.pattern)
        if terms:
            gates[rule.pattern] = tuple(_term_of(term) for term in terms)
        else:
            missing.append(rule)
    if missing:
        gates.update(derived_gates(missing))
    return gates


def vet_shipped(rules: Iterable[Rule]) -> None:
    """Mark the shipped rules, so that their gates prefilter them in classify(), with the
    gates read from :data:`SHIPPED_GATES`."""
    _GATES.update(shipped_gates(rules))


def ensure_shipped() -> None:
    """Vet the shipped rules (once per process)."""
    if _SHIPPED_DONE:
        return
    from probewise.responses.default_rules import SHIPPED

    with _SHIPPED_LOCK:
        if not _SHIPPED_DONE:
            vet_shipped(SHIPPED)
            _SHIPPED_DONE.append(True)


def gate_of(pattern: str) -> Gate | None:
    """The gate of a vetted pattern, or None for a caller's."""
    if not _SHIPPED_DONE:
        ensure_shipped()
    return _GATES.get(pattern)


def vetted(rules: Iterable[Rule]) -> bool:
    """Whether every rule is a vetted one: it has a gate."""
    return all(gate_of(rule.pattern) is not None for rule in rules)
