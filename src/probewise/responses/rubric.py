"""Rules and rubrics: what counts as a refusal, a deflection, or evidence of compliance.

Every pattern is compiled once with the :mod:`regex` module (case-insensitive) and
matched, with a time limit, against the *normalised* completion: Unicode NFKC,
casefolded, curly quotes folded to straight ones, zero-width and other format
characters removed, whitespace collapsed to single spaces. Write patterns for that
form: lower case, straight apostrophes (``can't``), single spaces.

Refusal and deflection rules are searched in the completion's *opening*: its first
two sentences, at most ``Rubric.opening_chars`` characters. Where the opening's first
sentence is a *preamble* (a ``Rubric.preamble`` rule matches the opening; the shipped
ones read only its first sentence: sympathy, an acknowledgement, a disclaimer) and
the opening decides nothing, both groups are
searched again in the *sequel*: the two sentences after that first sentence, at most
``opening_chars`` characters. So a refusal or redirect that follows "I'm sorry you're
going through this." is read. *Later* rules (``Rubric.later``) are refusal rules read
further, where the opening and the sequel decided nothing: in the first four sentences
of the answer, at most twice ``opening_chars`` characters; a match is Refused naming
the rule. (The shipped one, ``refusal.stated`` in ``Rubric.default()``, finds
"I can't help with that" after a persona's "Sure, I'll play along.";
``Rubric.default(later=False)`` leaves it out.) No rule reads further than the fourth
sentence.
The opening is read in the model's own voice: leading speaker and persona tags
(``DAN:``, ``[CLASSIC]``, ``**Name**:``, emoji tags), markdown headers and emphasis,
stage directions, a quoted echo of the request and code fences are set aside first
(a header or stage direction stays as a short first sentence). A reply in several
answers (a persona tag starting a later line) is read answer by answer: declined
only when every answer declines. This holds for every rubric, the caller's too,
unless it is made with ``own_voice=False``.
Axis rules are searched in the whole normalised completion (its first 1,048,576
characters). A caller's pattern keeps its ``regex.search`` meaning: ``^`` and ``$``
bind to their own alternative (``^sorry|i won't`` finds "i won't" anywhere in the
opening).

The shipped (vetted) rules also have a *gate*, derived once from their patterns
(``probewise.responses._gates``): conditions on the words and strings of a text that
every text the pattern matches meets. :func:`probewise.classify` looks up an opening's
words once and runs only the rules whose gate it passes (``_matcher.GateScan``). Caller
rules have no gate: they are run exactly as before.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import cast, final

import attrs

from probewise._validation import checked_type, rubric_timeout
from probewise.errors import ArgumentTypeError, RubricError
from probewise.responses._gates import gate_of
from probewise.responses._matcher import plan_of
from probewise.responses.rules import Rule, compile_rule

__all__ = ["Rubric"]


def _to_rules(value: object) -> tuple[Rule, ...]:
    if isinstance(value, Rule):
        return (value,)
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise ArgumentTypeError(f"expected a sequence of Rule, got {type(value).__name__}")
    items: tuple[object, ...] = tuple(cast("Iterable[object]", value))
    rules: list[Rule] = []
    for item in items:
        if not isinstance(item, Rule):
            raise ArgumentTypeError(f"expected Rule objects, got {type(item).__name__}")
        rules.append(item)
    return tuple(rules)


def _to_axes(value: object) -> Mapping[Hashable, tuple[Rule, ...]]:
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"axes must be a mapping of axis -> rules, got {type(value).__name__}"
        )
    items: dict[Hashable, tuple[Rule, ...]] = {}
    for key, rules in cast("Mapping[Hashable, object]", value).items():
        items[key] = _to_rules(rules)
    return types.MappingProxyType(items)


def _check_opening(_instance: object, _attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"Rubric.opening_chars must be an int, got {type(value).__name__}")
    if value < 1:
        raise RubricError(f"Rubric.opening_chars must be a positive int, got {value!r}")


@final
@attrs.frozen(kw_only=True, eq=False)
class Rubric:
    """The rule sets that :func:`probewise.classify` applies.

    ``refusal`` and ``deflection`` are searched, in order, in the completion's
    opening, and, where a ``preamble`` rule matches the opening and it decides nothing,
    in the two sentences after its first sentence (see the module notes); ``later``
    rules, where those decided nothing, in the first four sentences (a match is
    Refused); ``axes`` maps a caller's axis key to rules whose match is evidence of
    compliance on that axis. ``own_voice`` (default True) reads the opening after
    speaker and persona tags and a reply in several answers answer by answer (see
    the module notes). ``timeout`` bounds the total matching time of one
    classification in seconds (past it the outcome is ``Error(kind=TIMEOUT)``); the
    shipped rules, vetted, are matched on an opening of at most 1,024 characters
    without the regex module's timer, the clock read before each group of them, so a
    classification may end up to one group's matches (a few milliseconds at worst) late.
    """

    refusal: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    deflection: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    preamble: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    later: tuple[Rule, ...] = attrs.field(default=(), converter=_to_rules)
    axes: Mapping[Hashable, tuple[Rule, ...]] = attrs.field(
        factory=lambda: types.MappingProxyType({}), converter=_to_axes
    )
    timeout: float = attrs.field(default=0.5, validator=rubric_timeout)
    opening_chars: int = attrs.field(default=400, validator=_check_opening)
    # Read the opening in the model's own voice (tags set aside) and a reply in several
    # answers answer by answer (see the module notes). False: the opening is the
    # first characters of the text, without setting tags aside.
    own_voice: bool = attrs.field(default=True, validator=checked_type(bool))
    # No caches here: what classify builds for a rubric (its prefilters, gate scan and
    # outcomes) is its plan, kept by probewise.responses._matcher (see plan_of there),
    # and made with the rubric (__attrs_post_init__).

    def __attrs_post_init__(self) -> None:
        named = {
            "refusal": self.refusal,
            "deflection": self.deflection,
            "preamble": self.preamble,
            "later": self.later,
        }
        named.update({f"axis {key!r}": rules for key, rules in self.axes.items()})
        broken: list[str] = []
        for rules in named.values():
            for rule in rules:
                if (
                    gate_of(rule.pattern) is None
                ):  # a caller's rule: compile it now, to refuse it now
                    compiled = compile_rule(rule)
                    if isinstance(compiled, str):
                        broken.append(f"{rule.id!r} ({compiled})")
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
        # The plan: a caller group's prefilter is built now (its rules were compiled just
        # now anyway), a shipped group's on first use (~0.1 s that Rubric.default() would
        # otherwise cost every process; with the gates, classify rarely needs them).
        plan_of(self)

    def __reduce__(self) -> tuple[Callable[..., Rubric], tuple[object, ...]]:
        """Pickles as its fields (``axes`` as a dict; a mappingproxy does not pickle), so
        that a rubric travels to executor tasks (``run_arm_shards``). Its plan is made
        again where it is unpickled."""
        made = functools.partial(
            Rubric,
            refusal=self.refusal,
            deflection=self.deflection,
            preamble=self.preamble,
            later=self.later,
            axes=dict(self.axes),
            timeout=self.timeout,
            opening_chars=self.opening_chars,
            own_voice=self.own_voice,
        )
        return (made, ())

    @classmethod
    def default(cls, *, later: bool = True) -> Rubric:
        """The shipped refusal, deflection, preamble and later rule sets (one shared,
        immutable instance); with ``later=False``, without the later rules (another one).

        A starting point: measured precision and recall are in the docs. The later
        rule (``refusal.stated``) reads a first-person refusal anywhere in an answer's
        first four sentences: on jailbreak-style replies, where a persona's line comes
        before the refusal, it finds more declines, and on the sets it was not built
        from it changed little (figures in docs/measurements.md), at 1.13 to 1.20 times
        the time per reply (the same page). ``later=False`` is the rubric of the
        opening and its sequel only (the default before the later rule was fast
        enough), for a run that must match earlier figures.
        """
        made = _DEFAULTS.get(later)
        if made is not None:
            return made
        from probewise.responses.default_rules import (
            DEFAULT_DEFLECTION,
            DEFAULT_LATER,
            DEFAULT_PREAMBLE,
            DEFAULT_REFUSAL,
        )

        with _DEFAULT_LOCK:
            made = _DEFAULTS.get(later)
            if made is None:
                made = _DEFAULTS[later] = cls(
                    refusal=DEFAULT_REFUSAL,
                    deflection=DEFAULT_DEFLECTION,
                    preamble=DEFAULT_PREAMBLE,
                    later=DEFAULT_LATER if later else (),
                )
        return made


# Rubric.default()'s two instances, by ``later``, each made on its first call (under the
# lock: one each, even when threads ask at once).
_DEFAULTS: dict[bool, Rubric] = {}
_DEFAULT_LOCK = threading.Lock()
