"""One streamed completion for ``OpenAICompatibleGenerator(stream=True)``: the events'
text gathered, asked about as it grows, and sealed at the end.

:func:`._http.stream_exchange` hands each server-sent event's data to
:meth:`StreamReader.feed`. The text stays in the reader's list of pieces (never shown,
logged or put in an error); with a :class:`~.decide.StopWhenDecided` it is asked, every
``every`` new characters, whether the outcome is decided, and the reader tells the
exchange to close the stream when it is. :meth:`StreamReader.result` seals the text.
Error messages say what was wrong with an event's shape, never what it held.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import cast, final

from probewise.errors import (
    InferenceServerError,
    MalformedResponseError,
    UnknownFinishReasonError,
)
from probewise.responses._http import Streamed
from probewise.responses.decide import StopWhenDecided
from probewise.responses.outcome import FinishReason
from probewise.responses.sealed import Completion, Sealed

__all__ = ["StreamReader"]


@final
class StreamReader:
    """The state of one streamed attempt (see the module notes)."""

    __slots__ = ("_chat", "_fresh", "_map", "_pieces", "_stop", "error", "finish", "tokens")

    def __init__(
        self,
        *,
        chat: bool,
        finish_reasons: Mapping[str, FinishReason],
        stop: StopWhenDecided | None,
    ) -> None:
        self._chat = chat
        self._map = finish_reasons
        self._stop = stop
        self._pieces: list[str] = []
        self._fresh = 0  # characters since the decision point was last asked
        self.finish: FinishReason | None = None
        self.error: str | None = None  # what was wrong, in probewise's words
        self.tokens = 0  # events that carried text (one token each on vLLM, SGLang, llama.cpp)

    def feed(self, payload: bytes) -> bool:
        """Reads one event's data; True to stop reading (an error, or decided)."""
        if self.finish is not None:
            return False  # after the finish reason: a usage event, say
        try:
            document: object = json.loads(payload)
        except (ValueError, RecursionError):
            return self._fail("an event that is not JSON")
        if not isinstance(document, dict):
            return self._fail("an event that is not a JSON object")
        fields = cast("dict[str, object]", document)
        if "error" in fields:
            return self._fail("an error event")
        choices = fields.get("choices")
        if not isinstance(choices, list):
            return self._fail("an event without its choices list")
        if not choices:
            return False  # (a usage event)
        first = cast("list[object]", choices)[0]
        if not isinstance(first, dict):
            return self._fail("an event with a choice that is not an object")
        choice = cast("dict[str, object]", first)
        piece = self._piece(choice)
        if piece is None:
            return True
        if piece:
            self._pieces.append(piece)
            self._fresh += len(piece)
            self.tokens += 1
        reason = choice.get("finish_reason")
        if reason is not None:
            finish = self._map.get(reason) if isinstance(reason, str) else None
            if finish is None:
                self.error = "finish_reason"
                return True
            self.finish = finish
            return False
        stop = self._stop
        if stop is not None and self._fresh >= stop.every:
            self._fresh = 0
            if stop.decided("".join(self._pieces)):
                self.finish = FinishReason.DECIDED
                return True
        return False

    def _piece(self, choice: dict[str, object]) -> str | None:
        """The event's text ("" for none); None (after noting why) for a wrong shape."""
        if self._chat:
            delta = choice.get("delta", {})
            if not isinstance(delta, dict):
                self._fail("a chat event without a delta")
                return None
            text = cast("dict[str, object]", delta).get("content")
        else:
            text = choice.get("text")
        if text is None:
            return ""
        if not isinstance(text, str):
            self._fail("an event whose text is not a string")
            return None
        return text

    def _fail(self, what: str) -> bool:
        self.error = what
        return True

    def result(
        self, ended: Streamed, *, url: str, attempts: int
    ) -> Completion | InferenceServerError:
        """The sealed completion, or the error saying why there is none."""
        if self.error == "finish_reason":  # the value is the server's: never shown
            return UnknownFinishReasonError(
                "the stream has a finish_reason that is not in the generator's finish_reasons map",
                url=url,
                attempts=attempts,
            )
        if self.error is not None:
            return MalformedResponseError(
                f"the stream has {self.error}", url=url, attempts=attempts, status=None
            )
        finish = self.finish
        if finish is None:  # ended (or [DONE]) before any finish_reason
            how = "sent [DONE]" if ended is Streamed.DONE else "ended"
            return UnknownFinishReasonError(
                f"the stream {how} without a finish_reason", url=url, attempts=attempts
            )
        text = "".join(self._pieces)
        self._pieces.clear()
        return Completion(Sealed(text), finish, tokens=self.tokens)
