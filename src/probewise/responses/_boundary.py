"""The text boundary against exceptions: what escapes carries no completion text.

Around the caller's generator and judge and around classify's own matching, an
exception that must propagate (a :class:`BaseException` that is not an
:class:`Exception`: ``KeyboardInterrupt``, ``SystemExit``, ...) may hold the text in
its message or in the locals of the frames its traceback keeps. Each such boundary
catches it, clears those frames (:func:`traceback.clear_frames`), drops it, and,
outside the handler (so that the new exception has no ``__context__``), raises
:func:`fresh`'s copy ``from None``.
"""

from __future__ import annotations

import traceback


def drop(error: BaseException) -> None:
    """Clear the locals of every finished frame ``error``'s traceback holds, and the
    traceback itself: the text those frames held goes with them."""
    traceback.clear_frames(error.__traceback__)
    error.__traceback__ = None


def fresh(error: BaseException) -> BaseException:
    """A new exception of ``error``'s class that holds no text.

    Made with no arguments (``SystemExit`` keeps an int exit code). A class that
    cannot be made so is made without running its ``__init__``; failing that too,
    the result is a ``KeyboardInterrupt`` (the run stops either way).
    """
    kind = type(error)
    if kind is SystemExit:
        code = error.code if isinstance(error, SystemExit) else None
        return SystemExit(code) if isinstance(code, int) else SystemExit()
    try:
        made = kind()
    except BaseException:
        try:
            made = kind.__new__(kind)
        except BaseException:
            return KeyboardInterrupt()
    if type(made) is not kind:
        return KeyboardInterrupt()
    return made
