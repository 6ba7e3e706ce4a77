"""Rule: a named regular expression, matched case-insensitively against normalised text.

This module imports nothing from :mod:`probewise.responses`: the outcomes, the rubric
and the shipped rules all import :class:`Rule` from here.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import final

import attrs
import regex

from probewise.errors import ArgumentTypeError, RubricError

__all__ = ["Rule"]

FLAGS = regex.IGNORECASE | regex.V0
"""The flags every pattern compiles with."""


def _nonempty_str(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"Rule.{attribute.name} must be a str, got {type(value).__name__}")
    if attribute.name == "id" and not value:
        raise RubricError("Rule.id must not be empty")


@final
@attrs.frozen(repr=False)
class Rule:
    """A named regular expression.

    ``Rule(id, pattern)``: the pattern is compiled once, case-insensitive, on first use.
    A pattern that does not compile does not raise here: the :class:`~probewise.Rubric`
    that receives the rule compiles it and rejects it with :class:`~probewise.RubricError`,
    naming the rule's id.
    """

    id: str = attrs.field(validator=_nonempty_str)
    pattern: str = attrs.field(validator=_nonempty_str)

    def __repr__(self) -> str:
        return f"Rule(id={self.id!r}, pattern={self.pattern!r})"

    @property
    def compiled(self) -> regex.Pattern[str]:
        """The compiled pattern (raises :class:`~probewise.RubricError` if it does not compile)."""
        compiled = compile_rule(self)
        if isinstance(compiled, str):
            raise RubricError(f"rule {self.id!r}: pattern does not compile ({compiled})")
        return compiled


# Each rule's compiled pattern, or why it does not compile ("TypeName: message"), by the
# rule's identity: a Rule is a plain value (equal by id and pattern), and the cache is kept
# here rather than in it. By identity, as a field of the rule would be: each rule object is
# compiled once, the first time it is needed, and its entry goes when it is collected.
_COMPILED: dict[int, regex.Pattern[str] | str] = {}
_COMPILING = threading.Lock()


def _forget(key: int) -> None:
    _COMPILED.pop(key, None)


def compile_rule(rule: Rule, *, strict: bool = True) -> regex.Pattern[str] | str:
    """``rule``'s compiled pattern, or why it does not compile; compiled once.

    ``strict`` (a caller's rule) compiles with warnings turned into errors, as a caller's
    pattern always was; a vetted pattern (a shipped rule, which compiles without warnings:
    the tests check it with warnings as errors) is compiled with ``strict=False``, without
    a warnings filter, since ``warnings.catch_warnings`` swaps a process-wide list, which
    is not safe from several threads. Two threads may both compile a rule: each result is
    an equal pattern, and the first one stored is kept.
    """
    key = id(rule)
    found = _COMPILED.get(key)
    if found is not None:
        return found
    result: regex.Pattern[str] | str
    try:
        if strict:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                result = regex.compile(rule.pattern, FLAGS)
        else:
            result = regex.compile(rule.pattern, FLAGS)
    except Exception as error:
        result = f"{type(error).__name__}: {error}"
    with _COMPILING:
        found = _COMPILED.get(key)
        if found is not None:
            return found
        _COMPILED[key] = result
        weakref.finalize(rule, _forget, key)
    return result
