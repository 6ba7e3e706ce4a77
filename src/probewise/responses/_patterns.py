"""Reading a pattern's text: what :mod:`._matcher` and :mod:`.classifier` need to know
of a rule's pattern before matching it (whether every match starts at 0, whether it
is a guarded pattern, whether ``IGNORECASE`` changes anything). Conservative: each
answers False (or None) when unsure, and the caller then matches the pattern as
written.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

__all__ = ["anchored", "caseless", "split_guard"]

# Inline flag groups that turn on verbose mode ("#" comments, ignored whitespace).
_VERBOSE = re.compile(r"\(\?[a-zA-Z^-]*x")


class _Unread(Exception):
    """A construct that :func:`_structure` does not read (a nested class)."""


def _structure(pattern: str, start: int) -> Iterator[tuple[int, str]]:
    """The characters of ``pattern`` from ``start`` on that are outside escapes and
    character classes, with their index. Raises :class:`_Unread` at a nested class."""
    at, end = start, len(pattern)
    while at < end:
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            at += 1
            if pattern[at : at + 1] == "^":
                at += 1
            if pattern[at : at + 1] == "]":  # a "]" first in a class is literal
                at += 1
            while at < end and pattern[at] != "]":
                if pattern[at] == "[":
                    raise _Unread
                at += 2 if pattern[at] == "\\" else 1
        else:
            yield at, char
        at += 1


@functools.lru_cache(maxsize=4096)
def anchored(pattern: str) -> bool:
    """Whether every match of ``pattern`` on normalised text (which has no newlines)
    starts at 0: it starts with ``^`` and has no ``|`` outside groups and classes, so
    that ``^`` governs every alternative (``^sorry|i won't`` is not anchored: its
    second alternative matches anywhere). False when unsure (comments, verbose mode,
    nested sets): the caller then searches, which is always right."""
    if not pattern.startswith("^") or "(?#" in pattern or _VERBOSE.search(pattern):
        return False
    depth = 0
    try:
        for _, char in _structure(pattern, 1):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth < 0:
                    return False
            elif char == "|" and depth == 0:
                return False
    except _Unread:
        return False
    return True


def _group_end(pattern: str, start: int) -> int:
    """The index of the ``)`` that closes the group opened at ``pattern[start]``, or -1
    (unbalanced, or a construct :func:`_structure` does not read)."""
    depth = 0
    try:
        for at, char in _structure(pattern, start):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return at
    except _Unread:
        return -1
    return -1


# Escapes that match the same with and without IGNORECASE (\b, \w, \s, \d, their
# negations, \A, \Z and the whitespace escapes); an escaped non-alphanumeric character
# is that character.
_CASELESS_ESCAPES = frozenset("bBwWsSdDAZntrfv")
# What may follow "(?": non-capturing groups, lookarounds and atomic groups (no inline
# flags, no named groups).
_CASELESS_GROUPS = (":", "=", "!", ">", "<=", "<!")


def caseless(pattern: str) -> bool:
    r"""Whether ``pattern`` matches the same with and without ``IGNORECASE`` on every
    text with no ASCII capital and none of :data:`~._gates.CASE_TWINS` (a normalised
    text without a dotless i: the texts that the gated rules read).

    With ``IGNORECASE`` a lower-case ASCII letter (alone or in a class or range) also
    matches its capital and its case twins (tested for every code point in the gates'
    tests), which such a text does not hold; other ASCII characters have no case. So
    an ASCII pattern with no capital but in the escapes above, no other escape that is
    a letter or digit (``\x41``, ``\p{Lu}``, backreferences) and no inline flags
    matches the same. False when unsure."""
    if not pattern.isascii():
        return False
    at, end = 0, len(pattern)
    while at < end:
        char = pattern[at]
        if char == "\\":
            escaped = pattern[at + 1 : at + 2]
            if escaped.isalnum() and escaped not in _CASELESS_ESCAPES:
                return False
            at += 2
            continue
        if "A" <= char <= "Z":
            return False
        if (
            char == "("
            and pattern[at + 1 : at + 2] == "?"
            and not pattern.startswith(_CASELESS_GROUPS, at + 2)
        ):
            return False
        at += 1
    return True


_GUARD_OPEN = "^(?!.*?"


def split_guard(pattern: str) -> tuple[str, str] | None:
    """``(guard, body)`` for a pattern ``^(?!.*?GUARD).*?BODY`` (anchored: no ``|`` at
    its top level; see :func:`anchored`), else None.

    On a text with no newline (normalised text: ``.`` matches every character of it)
    the pattern matches iff ``GUARD`` is found nowhere and ``BODY`` is found somewhere,
    so classify searches the two apart and, where several rules share one guard (the
    shipped deflection rules that do not fire beside an answer), looks for the guard
    once per opening. The caller also checks that the parts compile with the flags of
    the whole and have no groups (see :meth:`._matcher.Plan.step`)."""
    if not pattern.startswith(_GUARD_OPEN) or not anchored(pattern):
        return None
    close = _group_end(pattern, 1)
    if close < 0 or pattern[close + 1 : close + 4] != ".*?" or close + 4 >= len(pattern):
        return None
    return f"(?:{pattern[len(_GUARD_OPEN) : close]})", f"(?:{pattern[close + 4 :]})"
