"""Rules and rubrics: what counts as a refusal, a deflection, or evidence of compliance.

Every pattern is compiled once with the :mod:`regex` module (case-insensitive) and
matched, with a time limit, against the *normalised* completion: Unicode NFKC,
casefolded, curly quotes folded to straight ones, zero-width and other format
characters removed, whitespace collapsed to single spaces. Write patterns for that
form: lower case, straight apostrophes (``can't``), single spaces.

Refusal and deflection rules are searched in the completion's *opening*: its first
two sentences, at most ``Rubric.opening_chars`` characters. Axis rules are searched
in the whole normalised completion.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import cast, final

import attrs
import regex

from probewise.errors import RubricError

__all__ = ["Rubric", "Rule"]

_FLAGS = regex.IGNORECASE | regex.V0


def _nonempty_str(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"Rule.{attribute.name} must be a str, got {type(value).__name__}")
    if attribute.name == "id" and not value:
        raise ValueError("Rule.id must not be empty")


@final
@attrs.frozen(repr=False)
class Rule:
    """A named regular expression.

    ``Rule(id, pattern)``: the pattern is compiled once, case-insensitive. A pattern
    that does not compile does not raise here: the :class:`Rubric` that receives the
    rule rejects it with :class:`~probewise.RubricError`, naming the rule's id.
    """

    id: str = attrs.field(validator=_nonempty_str)
    pattern: str = attrs.field(validator=_nonempty_str)
    _compiled: regex.Pattern[str] | None = attrs.field(
        init=False, eq=False, hash=False, default=None
    )
    _compile_error: str | None = attrs.field(init=False, eq=False, hash=False, default=None)

    def __attrs_post_init__(self) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                compiled = regex.compile(self.pattern, _FLAGS)
        except Exception as error:
            object.__setattr__(self, "_compile_error", f"{type(error).__name__}: {error}")
        else:
            object.__setattr__(self, "_compiled", compiled)

    def __repr__(self) -> str:
        return f"Rule(id={self.id!r}, pattern={self.pattern!r})"

    @property
    def compiled(self) -> regex.Pattern[str]:
        """The compiled pattern (raises :class:`~probewise.RubricError` if it did not compile)."""
        if self._compiled is None:
            raise RubricError(f"rule {self.id!r}: pattern does not compile ({self._compile_error})")
        return self._compiled


def _to_rules(value: object) -> tuple[Rule, ...]:
    if isinstance(value, Rule):
        return (value,)
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise TypeError(f"expected a sequence of Rule, got {type(value).__name__}")
    items: tuple[object, ...] = tuple(cast("Iterable[object]", value))
    rules: list[Rule] = []
    for item in items:
        if not isinstance(item, Rule):
            raise TypeError(f"expected Rule objects, got {type(item).__name__}")
        rules.append(item)
    return tuple(rules)


def _to_axes(value: object) -> Mapping[Hashable, tuple[Rule, ...]]:
    if not isinstance(value, Mapping):
        raise TypeError(f"axes must be a mapping of axis -> rules, got {type(value).__name__}")
    items: dict[Hashable, tuple[Rule, ...]] = {}
    for key, rules in cast("Mapping[Hashable, object]", value).items():
        items[key] = _to_rules(rules)
    return types.MappingProxyType(items)


def _combine(rules: tuple[Rule, ...]) -> regex.Pattern[str] | None:
    """One alternation of every rule, used as a prefilter: if it finds nothing, no rule
    matches. Only built when every pattern is free of capturing groups (so that no
    backreference changes meaning) and the combination compiles cleanly."""
    if len(rules) < 2 or any(rule.compiled.groups for rule in rules):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            body = "|".join(f"(?:{rule.pattern})" for rule in rules)
            # Every alternative anchored: anchor the whole, so matching tries position 0 only.
            anchored = all(rule.pattern.startswith("^") for rule in rules)
            return regex.compile(f"^(?:{body})" if anchored else body, _FLAGS)
    except Exception:
        return None


def _check_timeout(_instance: object, _attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise RubricError(f"timeout must be a positive number of seconds, got {value!r}")


def _check_opening(_instance: object, _attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RubricError(f"opening_chars must be a positive int, got {value!r}")


@final
@attrs.frozen(kw_only=True, eq=False)
class Rubric:
    """The rule sets that :func:`probewise.classify` applies.

    ``refusal`` and ``deflection`` are searched, in order, in the completion's
    opening; ``axes`` maps a caller's axis key to rules whose match is evidence of
    compliance on that axis. ``timeout`` bounds the total matching time of one
    classification in seconds (past it the outcome is ``Error(kind=TIMEOUT)``).
    """

    refusal: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    deflection: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    axes: Mapping[Hashable, tuple[Rule, ...]] = attrs.field(
        factory=lambda: types.MappingProxyType({}), converter=_to_axes
    )
    timeout: float = attrs.field(default=0.5, validator=_check_timeout)
    opening_chars: int = attrs.field(default=400, validator=_check_opening)
    _refusal_any: regex.Pattern[str] | None = attrs.field(init=False, default=None, repr=False)
    _deflection_any: regex.Pattern[str] | None = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        named = {"refusal": self.refusal, "deflection": self.deflection}
        named.update({f"axis {key!r}": rules for key, rules in self.axes.items()})
        broken = [
            f"{rule.id!r} ({rule._compile_error})"
            for rules in named.values()
            for rule in rules
            if rule._compile_error is not None
        ]
        if broken:
            raise RubricError(
                "rule patterns that do not compile: " + "; ".join(broken) + ". Fix or drop them."
            )
        for where, rules in named.items():
            ids = [rule.id for rule in rules]
            duplicates = sorted({rule_id for rule_id in ids if ids.count(rule_id) > 1})
            if duplicates:
                raise RubricError(
                    f"{where} rules repeat ids {duplicates}: give each rule its own id"
                )
        object.__setattr__(self, "_refusal_any", _combine(self.refusal))
        object.__setattr__(self, "_deflection_any", _combine(self.deflection))

    @classmethod
    def default(cls) -> Rubric:
        """The shipped refusal and deflection rule sets (one shared, immutable instance).

        A starting point: measured precision and recall are in the docs.
        """
        from probewise.responses.default_rules import DEFAULT_RUBRIC

        return DEFAULT_RUBRIC
