"""What classify read of a text: whether any window it read ran into the text's end.

:func:`probewise.responses.decide.decided_outcome` classifies a growing prefix of a
reply while a :class:`Reach` records. The classifier reads bounded windows of the text
(the opening, the preamble's sequel, the later rules' window of four sentences, the
first ``_prefix_chars`` characters where it
looks for later answers, the axis window, the tags that :mod:`._voice` sets aside); at
each, it reports here whether the window was settled inside the text or reached its
end (where more text could change what the window holds). When none reached the end,
the outcome of the prefix is the outcome of every text that starts with it.

Outside a recording every report is one comparison or one context-variable read.
Nothing here keeps text.
"""

from __future__ import annotations

import re
from contextvars import ContextVar, Token
from typing import final

__all__ = ["Reach", "reads", "scanned", "start", "stop", "touched"]


@final
class Reach:
    """One recording: ``open`` is True once a window ran into the end of its text."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = False


_CURRENT: ContextVar[Reach | None] = ContextVar("probewise_reach", default=None)
# What the unbounded parts of _voice's patterns consume: runs of whitespace and "#".
_FILLER = re.compile(r"[ \t\r\n\u00a0\u3000#]+")


def start(reach: Reach) -> Token[Reach | None]:
    """Record into ``reach`` in this context until :func:`stop`."""
    return _CURRENT.set(reach)


def stop(token: Token[Reach | None]) -> None:
    _CURRENT.reset(token)


def touched() -> None:
    """A window ran into the end of its text."""
    reach = _CURRENT.get()
    if reach is not None:
        reach.open = True


def reads(end: int, length: int) -> None:
    """A window of the first ``end`` characters of a text ``length`` long was read:
    it reached the text's end unless the text is longer (the window is then the same
    in every longer text)."""
    if length <= end:
        touched()


def scanned(raw: str, at: int, span: int) -> None:
    """Patterns were matched from ``raw[at:]`` (and before) that consume at most
    ``span`` characters that are not whitespace or "#" (their unbounded parts take
    only those): they stayed inside ``raw`` when more than ``span`` such characters
    follow ``at``."""
    reach = _CURRENT.get()
    if reach is not None and len(raw) - at - _filler(raw, at) <= span:
        reach.open = True


def _filler(raw: str, at: int) -> int:
    return sum(match.end() - match.start() for match in _FILLER.finditer(raw, at))
