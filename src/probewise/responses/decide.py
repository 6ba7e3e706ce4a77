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

from collections.abc import Hashable

from probewise.responses import _reach
from probewise.responses.classifier import Completion, classify
from probewise.responses.outcome import Error, FinishReason, Outcome
from probewise.responses.rubric import Rubric
from probewise.responses.sealed import Sealed

__all__ = ["decided_outcome"]


def decided_outcome(
    prefix: str | Sealed, rubric: Rubric | None = None, *, axis: Hashable | None = None
) -> Outcome | None:
    """The outcome of every reply that starts with ``prefix``, or ``None`` while more
    text could still change it.

    That is :func:`probewise.classify`'s outcome of ``prefix`` (finished by the model,
    not truncated) when none of the windows the classifier read reached the end of
    ``prefix``: its opening is complete (the sentences ended, or ``opening_chars``
    were read), and so is what it reads past the opening (a preamble's next
    sentences; where the first answer declines, the first
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
