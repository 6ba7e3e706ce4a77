"""The decision point: whether the text of a reply so far already fixes its outcome.

:func:`decided_outcome` classifies a prefix of a reply with :func:`probewise.classify`
while :mod:`._reach` records whether any window the classifier read (the opening, the
preamble's sequel, the tags set aside before it, the stretch where later answers are
looked for, the axis window) ran into the end of the prefix. When none did, every
reply that starts with the prefix reads the same windows, so it gets the same outcome:
the classifier itself says what it read, and a change to the rules cannot make the
decision point disagree with it.

Generators ask it while they generate (``stop_when_decided``) and stop once it answers.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeAlias, cast, final

import attrs

from probewise._validation import checked_type, positive
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses import _reach
from probewise.responses.classifier import classify
from probewise.responses.outcome import Error, FinishReason, Outcome
from probewise.responses.rubric import Rubric
from probewise.responses.sealed import Completion, Sealed

__all__ = ["StopSpec", "StopWhenDecided", "decided_outcome", "per_prompt"]


def decided_outcome(
    prefix: str | Sealed, rubric: Rubric | None = None, *, axis: Hashable | None = None
) -> Outcome | None:
    """The outcome of every reply that starts with ``prefix``, or ``None`` while more
    text could still change it.

    That is :func:`probewise.classify`'s outcome of ``prefix`` (finished by the model,
    not truncated) when none of the windows the classifier read reached the end of
    ``prefix``: its opening is complete (the sentences ended, or ``opening_chars``
    were read), and so is what it reads past the opening (a preamble's next
    sentences; the later rules' window, the first four sentences, at most
    ``2 * opening_chars`` characters; where the first answer declines, the first
    ``max(65536, 64 * opening_chars)`` characters, where a later answer may start). A
    ``axis`` that the rubric maps reads the whole reply: an outcome that reaches its
    rules is decided only at the end. ``None`` for an :class:`~probewise.Error` too.
    Never returns or keeps the text; a ``prefix`` that is not a ``str`` or
    :class:`~probewise.Sealed` raises :class:`~probewise.errors.ArgumentTypeError`.
    """
    completion = Completion(prefix, FinishReason.STOP)  # (refuses a non-text at once)
    del prefix
    reach = _reach.Reach()
    token = _reach.start(reach)
    try:
        outcome = classify(completion, rubric, axis=axis)
    finally:  # (classify raises nothing but a fresh BaseException that holds no text)
        _reach.stop(token)
    if reach.open or isinstance(outcome, Error):
        return None
    return outcome


def _hashable(_instance: object, _attribute: object, value: object) -> None:
    try:
        hash(value)
    except TypeError:
        kind = type(value).__name__
        raise ArgumentTypeError(f"StopWhenDecided.axis must be hashable, got {kind}") from None


@final
@attrs.frozen(kw_only=True)
class StopWhenDecided:
    """What a generator that stops early stops on: the outcome of ``rubric`` (with
    ``axis``) is decided (:func:`decided_outcome`). Asked every ``every`` characters
    of new text at most (and at the end of a chunk).

    :func:`~probewise.run_arm` makes one from its own rubric and axis and hands it to
    a generator that can stop (``OpenAICompatibleGenerator(stream=True)``,
    :class:`~probewise.TransformersGenerator`); the completion then ends with
    :attr:`~probewise.FinishReason.DECIDED`.
    """

    rubric: Rubric = attrs.field(factory=Rubric.default, validator=checked_type(Rubric))
    axis: Hashable | None = attrs.field(default=None, validator=_hashable)
    every: int = attrs.field(default=16, validator=positive)

    def decided(self, text: str) -> bool:
        """Whether ``text``, a reply so far, fixes its outcome (only a bool comes back)."""
        return decided_outcome(text, self.rubric, axis=self.axis) is not None


StopSpec: TypeAlias = StopWhenDecided | Sequence[StopWhenDecided | None] | None
"""A generator's ``stop`` argument: one for every prompt, one per prompt, or none."""


def per_prompt(stop: StopSpec, count: int) -> list[StopWhenDecided | None]:
    """``stop`` as one entry per prompt of a batch of ``count``."""
    if stop is None or isinstance(stop, StopWhenDecided):
        return [stop] * count
    given = cast("object", stop)
    if isinstance(given, str) or not isinstance(given, Sequence):
        kind = type(given).__name__
        raise ArgumentTypeError(f"stop must be a StopWhenDecided or a sequence of them, got {kind}")
    stops = list(cast("Sequence[object]", given))
    if len(stops) != count:
        raise InvalidInputError(f"stop has {len(stops)} entries for {count} prompts")
    out: list[StopWhenDecided | None] = []
    for item in stops:
        if item is not None and not isinstance(item, StopWhenDecided):
            raise ArgumentTypeError(
                f"stop entries must be StopWhenDecided, got {type(item).__name__}"
            )
        out.append(item)
    return out
