"""Sealed: a holder for completion text that cannot be shown, copied or compared; and
Completion, the sealed text of one reply with why generation stopped.

The text goes in through ``Sealed(text)`` and comes out only inside
:func:`probewise.classify`. ``repr`` shows the length and nothing else; ``str``,
``format``, pickling, copying, equality and hashing refuse with
:class:`~probewise.SealedError` (whose message never carries the text).
"""

from __future__ import annotations

from typing import NoReturn, cast, final

import attrs

from probewise._validation import non_negative_int, optional
from probewise.errors import ArgumentTypeError, SealedError
from probewise.responses.outcome import FinishReason

__all__ = ["Completion", "Sealed"]


def _refuse(what: str) -> NoReturn:
    raise SealedError(f"Sealed text cannot be {what}; pass it to probewise.classify() instead")


@final
class Sealed:
    """Completion text that only :func:`probewise.classify` may read.

    >>> s = Sealed("anything")
    >>> s
    Sealed(<8 chars>)
    """

    __slots__ = ("__text",)

    def __init__(self, text: str, /) -> None:
        given = cast("object", text)
        del text
        if not isinstance(given, str):
            kind = type(given).__name__
            del given  # bytes or a list may hold the text: not left in this frame's locals
            raise ArgumentTypeError(f"Sealed() takes a str, got {kind}")
        # An exact str copy: a str subclass could override methods that the
        # classifier calls and smuggle the text out through an exception.
        self.__text: str = str.__getitem__(given, slice(None))

    def __init_subclass__(cls) -> None:
        raise SealedError("Sealed cannot be subclassed")

    def __len__(self) -> int:
        return len(self.__text)

    def __repr__(self) -> str:
        try:
            return f"Sealed(<{len(self.__text)} chars>)"
        except AttributeError:  # __init__ refused its argument (a traceback's locals show it)
            return "Sealed(<no text>)"

    def __str__(self) -> str:
        _refuse("converted to str")

    def __format__(self, format_spec: str) -> str:
        _refuse("formatted")

    def __reduce__(self) -> NoReturn:
        _refuse("pickled")

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        _refuse("pickled")

    def __getstate__(self) -> NoReturn:
        _refuse("pickled")

    def __copy__(self) -> NoReturn:
        _refuse("copied")

    def __deepcopy__(self, memo: object) -> NoReturn:
        _refuse("copied")

    def __eq__(self, other: object) -> NoReturn:
        _refuse("compared")

    def __ne__(self, other: object) -> NoReturn:
        _refuse("compared")

    def __hash__(self) -> NoReturn:
        _refuse("hashed")

    def __bool__(self) -> bool:
        return True


def _open(sealed: Sealed) -> str:  # pyright: ignore[reportUnusedFunction]
    """The text inside ``sealed``. Called only by :mod:`probewise.responses.classifier`."""
    return sealed._Sealed__text  # type: ignore[attr-defined,no-any-return]


_optional_count = optional(non_negative_int)


def _finish_reason(value: object) -> None:
    # The type only, never the value: a text passed in the wrong place is text.
    if not isinstance(value, FinishReason):
        raise ArgumentTypeError(
            f"Completion.finish_reason must be a FinishReason, got {type(value).__name__}"
        )


@final
@attrs.frozen(eq=False, init=False, repr=False)
class Completion:
    """A completion and why generation stopped. The text is sealed at once.
    ``tokens``: how many tokens were generated, where the generator counts them."""

    text: Sealed
    finish_reason: FinishReason = FinishReason.STOP
    tokens: int | None = attrs.field(default=None, kw_only=True)

    def __init__(
        self,
        text: str | Sealed,
        finish_reason: FinishReason = FinishReason.STOP,
        *,
        tokens: int | None = None,
    ) -> None:
        # Written out (not attrs' generated __init__, whose frame would keep ``text``):
        # a wrong-typed text is dropped from this frame's locals before the error.
        given = cast("object", text)
        del text
        if not isinstance(given, str | Sealed):
            kind = type(given).__name__
            del given  # bytes or a list may hold the text
            raise ArgumentTypeError(f"Completion.text must be a str or Sealed, got {kind}")
        sealed = given if isinstance(given, Sealed) else Sealed(given)
        del given
        _finish_reason(finish_reason)
        _optional_count(self, attrs.fields(Completion).tokens, tokens)
        object.__setattr__(self, "text", sealed)
        object.__setattr__(self, "finish_reason", finish_reason)
        object.__setattr__(self, "tokens", tokens)

    def __repr__(self) -> str:
        # A traceback with locals reprs the half-made instance of a refused __init__.
        text = getattr(self, "text", "<unset>")
        reason = getattr(self, "finish_reason", "<unset>")
        tokens = getattr(self, "tokens", None)
        return f"Completion(text={text!r}, finish_reason={reason!r}, tokens={tokens!r})"
