"""A ``transformers`` stopping criterion that ends each row of a batch once its outcome
is decided (:class:`~.decide.StopWhenDecided`), for
:class:`~probewise.TransformersGenerator`.

Every ``every_tokens`` new tokens it decodes each row that is still generating (no
end-of-sequence token yet) and asks the row's decision point. A decided row is
reported done (``generate`` pads it from then on) and its length kept, so that the
generator cuts it there and marks it :attr:`~probewise.FinishReason.DECIDED`; the
batch ends when every row is done. The decoded text lives only in this call's
locals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from probewise.responses.decide import StopWhenDecided

if TYPE_CHECKING:
    import torch

__all__ = ["DecidedRows"]


class DecidedRows:
    """The criterion (``transformers.StoppingCriteria``'s call protocol): ``decided``
    maps a row to its number of new tokens when it was decided."""

    def __init__(
        self,
        stops: Sequence[StopWhenDecided | None],
        *,
        start: int,
        eos: set[int],
        decode: Callable[[list[int]], str],
        every_tokens: int = 4,
    ) -> None:
        self._stops = list(stops)
        self._start = start
        self._eos = eos
        self._decode = decode
        self._every = every_tokens
        self.decided: dict[int, int] = {}

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **_: object) -> torch.Tensor:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        made = input_ids.shape[1] - self._start
        for row, decided in self.decided.items():
            done[row] = decided > 0
        if made <= 0 or made % self._every:
            return done
        rows = cast("list[list[int]]", input_ids[:, self._start :].tolist())  # pyright: ignore[reportUnknownMemberType]
        for row, (tokens, stop) in enumerate(zip(rows, self._stops, strict=True)):
            if stop is None or row in self.decided or any(t in self._eos for t in tokens):
                continue
            if stop.decided(self._decode(tokens)):
                self.decided[row] = made
                done[row] = True
        return done


def criteria_list(criterion: DecidedRows) -> object:
    """``criterion`` in a ``transformers.StoppingCriteriaList`` (as a subclass of
    ``StoppingCriteria``, which ``generate`` expects)."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Criterion(StoppingCriteria):
        def __call__(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object
        ) -> torch.Tensor:
            return criterion(input_ids, scores)

    return StoppingCriteriaList([_Criterion()])
