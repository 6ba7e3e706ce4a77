"""The live-storage tracker behind :func:`probewise.throughput.measure_bytes_per_logit`.

Imported only when a measurement runs, so that ``import probewise`` does not import
torch (see ``_ce_memory``'s docstring for what is counted).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.throughput._torch_logits import random_logits
from probewise.throughput.data.ce_chunks import LogitsDtype

__all__ = ["peak_once"]


class _LiveBytes(TorchDispatchMode):
    """Sums the bytes of the distinct storages alive, and remembers the most seen.

    Each storage is keyed by its ``id``; a weak reference to it, with a callback,
    drops it when the storage dies. Storages keep their Python object for as long as
    the C++ storage lives, so the callback fires on the real free, not on the Python
    wrapper going out of scope, and a later storage cannot reuse a live key.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        self._live: dict[int, tuple[weakref.ref[torch.UntypedStorage], int]] = {}
        self.current = 0
        self.peak = 0

    def track(self, tensor: torch.Tensor) -> None:
        """Count ``tensor``'s storage if it is new (or grew), and update the peak."""
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        key = id(storage)
        seen = self._live.get(key)
        if seen is not None:
            ref, old = seen
            if nbytes != old:  # resized in place (an ``out=`` op, ``resize_``)
                self._live[key] = (ref, nbytes)
                self.current += nbytes - old
        elif nbytes > 0:

            def free(_ref: weakref.ref[torch.UntypedStorage], key: int = key) -> None:
                self._free(key)

            ref = weakref.ref(storage, free)
            self._live[key] = (ref, nbytes)
            self.current += nbytes
        self.peak = max(self.peak, self.current)

    def close(self) -> None:
        """Stop following frees: drops the weak references, so no callback fires later."""
        self._live.clear()

    def _free(self, key: int) -> None:
        _ref, nbytes = self._live.pop(key)
        self.current -= nbytes

    def __torch_dispatch__(
        self,
        func: Callable[..., object],  # a torch OpOverload (no public name for its type)
        types: tuple[type, ...],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        out: object = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self.track(leaf)
        return out


def peak_once(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    shape: tuple[int, int, int],
    dtype: LogitsDtype,
    backward: bool,
    seed: int,
) -> int:
    """One tracked run of ``loss_fn``: the peak live tensor bytes."""
    logits, labels = random_logits(shape, dtype, seed=seed)

    tracker = _LiveBytes()
    tracker.track(logits)
    tracker.track(labels)
    # Frees are seen by reference counting; a cycle collection mid-call would move
    # them, so the collector is off while the loss runs. (Garbage made before the call
    # holds no tracked storage, so it need not be collected first.)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with tracker:
            # Typed as a tensor, but a caller's function may return anything.
            loss = cast(object, loss_fn(logits, labels))
            if not isinstance(loss, torch.Tensor):
                raise ArgumentTypeValueError(
                    f"loss_fn must return a scalar tensor, got {type(loss).__name__}"
                )
            if loss.dim() != 0:
                raise InvalidInputError(
                    f"loss_fn must return a scalar tensor, got shape {tuple(loss.shape)}: "
                    "reduce it (e.g. reduction='mean')"
                )
            if backward:
                if not loss.requires_grad:
                    raise InvalidInputError(
                        "loss_fn returned a tensor that does not require grad: "
                        "it must be computed from the logits for backward=True"
                    )
                torch.autograd.backward(loss)  # what ``loss.backward()`` calls, but typed
                if logits.grad is not None:
                    tracker.track(logits.grad)
    finally:
        if gc_was_enabled:
            gc.enable()
        peak = tracker.peak
        tracker.close()
    return peak
