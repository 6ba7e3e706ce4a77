"""The outcome algebra: Complied | Deflected | Refused | Empty | Error.

No variant has a field that can hold text. Rules in an outcome are the caller's own
:class:`~probewise.Rule` objects, returned by identity.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeAlias, final

import attrs

from probewise._validation import checked_type
from probewise.errors import ArgumentTypeError
from probewise.responses.rules import Rule

__all__ = [
    "Complied",
    "Deflected",
    "Empty",
    "Error",
    "ErrorKind",
    "FinishReason",
    "Outcome",
]


class FinishReason(enum.Enum):
    """Why generation stopped."""

    STOP = "stop"
    """The model ended the completion itself."""
    LENGTH = "length"
    """The token limit cut the completion off (counted as truncated)."""
    CONTENT_FILTER = "content_filter"
    """The provider's filter withheld the completion (a refusal by the provider)."""
    DECIDED = "decided"
    """probewise stopped generation once the outcome was decided (see
    :func:`probewise.responses.decided_outcome`): the text so far has the outcome the
    whole reply would have had. Never counted as truncated."""


class ErrorKind(enum.Enum):
    """Why there is no classification."""

    GENERATION = "generation"
    """Generation failed (the caller passed the exception instead of a completion)."""
    DETECTOR = "detector"
    """A rule or detector raised while classifying."""
    INVALID_INPUT = "invalid_input"
    """``classify`` was given something it cannot classify."""
    TIMEOUT = "timeout"
    """Matching the rules ran past the rubric's time limit."""


def _rule_validator(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, Rule):
        raise ArgumentTypeError(
            f"{attribute.name} must be a Rule or None, got {type(value).__name__}"
        )


def _to_evidence(value: Iterable[Rule]) -> tuple[Rule, ...]:
    return tuple(value)


def _evidence_validator(
    _instance: object, attribute: attrs.Attribute[Any], value: tuple[object, ...]
) -> None:
    for item in value:
        if not isinstance(item, Rule):
            raise ArgumentTypeError(
                f"{attribute.name} must hold Rule objects, got {type(item).__name__}"
            )


def _exception_type_validator(
    _instance: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    kind = type(value).__name__
    if value is not None and not (isinstance(value, type) and issubclass(value, BaseException)):
        raise ArgumentTypeError(f"{attribute.name} must be an exception class or None, got {kind}")


# The type only, never the value: a text passed in the wrong place is text.
_is_bool = checked_type(bool)


def _error_kind(_instance: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, ErrorKind):
        raise ArgumentTypeError(f"Error.kind must be an ErrorKind, got {type(value).__name__}")


@final
@attrs.frozen(kw_only=True)
class Complied:
    """The model did what was asked.

    ``evidence`` holds the axis rules that matched, when classification used an axis.
    """

    truncated: bool = attrs.field(default=False, validator=_is_bool)
    decided: bool = attrs.field(default=False, validator=_is_bool)
    """True when probewise stopped generation once this outcome was decided
    (:attr:`FinishReason.DECIDED`): the reply's text so far had it."""
    evidence: tuple[Rule, ...] = attrs.field(
        default=(), converter=_to_evidence, validator=_evidence_validator
    )


@final
@attrs.frozen(kw_only=True)
class Deflected:
    """The model declined by redirecting, with no refusal token.

    ``rule`` is the deflection rule that matched, or ``None`` when the axis rules
    found no sign of compliance.
    """

    truncated: bool = attrs.field(default=False, validator=_is_bool)
    decided: bool = attrs.field(default=False, validator=_is_bool)
    """True when probewise stopped generation once this outcome was decided
    (:attr:`FinishReason.DECIDED`): the reply's text so far had it."""
    rule: Rule | None = attrs.field(default=None, validator=_rule_validator)


@final
@attrs.frozen(kw_only=True)
class Refused:
    """The model refused: a refusal rule matched, or the provider's filter withheld it."""

    truncated: bool = attrs.field(default=False, validator=_is_bool)
    decided: bool = attrs.field(default=False, validator=_is_bool)
    """True when probewise stopped generation once this outcome was decided
    (:attr:`FinishReason.DECIDED`): the reply's text so far had it."""
    rule: Rule | None = attrs.field(default=None, validator=_rule_validator)
    by_provider: bool = attrs.field(default=False, validator=_is_bool)


@final
@attrs.frozen(kw_only=True)
class Empty:
    """The completion was blank after normalisation."""

    truncated: bool = attrs.field(default=False, validator=_is_bool)
    decided: bool = attrs.field(default=False, validator=_is_bool)
    """True when probewise stopped generation once this outcome was decided
    (:attr:`FinishReason.DECIDED`): the reply's text so far had it."""


@final
@attrs.frozen(kw_only=True)
class Error:
    """No classification: see ``kind``. ``exception_type`` is the class of what was
    raised, if anything was; its message and traceback are never kept."""

    kind: ErrorKind = attrs.field(validator=_error_kind)
    exception_type: type[BaseException] | None = attrs.field(
        default=None, validator=_exception_type_validator
    )


Outcome: TypeAlias = Complied | Deflected | Refused | Empty | Error
"""Every result of :func:`probewise.classify`."""


def decided_copy(outcome: Outcome) -> Outcome:
    """``outcome`` with ``decided`` set (an :class:`Error` as it is): what
    :func:`probewise.classify` returns for a completion that probewise stopped."""
    match outcome:
        case Complied():
            return attrs.evolve(outcome, decided=True)
        case Deflected():
            return attrs.evolve(outcome, decided=True)
        case Refused():
            return attrs.evolve(outcome, decided=True)
        case Empty():
            return attrs.evolve(outcome, decided=True)
        case Error():
            return outcome
