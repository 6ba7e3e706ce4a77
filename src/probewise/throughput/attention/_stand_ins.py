"""Stand-in masks: transformers' ``sdpa_mask`` read as row intervals, not built.

Where the mask function transformers composed is one
:mod:`probewise.throughput.attention._mask_function` models, :func:`structured_sdpa_mask`
hands the forward a one-element tensor expanded to the mask's shape (a
:class:`StandIn`) and keeps the row intervals it stands for and the bytes transformers
would have allocated; the recorder reads the intervals back by the tensor's storage.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Generator, Mapping
from typing import cast, final

import attrs
import numpy as np
import torch

from probewise.throughput.attention._band import RowIntervals

__all__ = ["StandIn", "stand_in_for", "structured_masks", "structured_sdpa_mask"]

_MASK_LOCK = threading.Lock()


@final
@attrs.frozen(kw_only=True, eq=False)
class StandIn:
    """What the probe handed the forward in place of a mask: a one-element tensor
    expanded to the mask's shape, and the mask it stands for."""

    tensor: torch.Tensor
    intervals: RowIntervals
    nbytes: int
    """Bytes of the tensor transformers would have built."""


def stand_in_for(tensor: torch.Tensor, stand_ins: Mapping[int, StandIn]) -> StandIn | None:
    stand_in = stand_ins.get(tensor.untyped_storage().data_ptr())
    if stand_in is None or not (
        stand_in.tensor.shape == tensor.shape
        and stand_in.tensor.stride() == tensor.stride()
        and stand_in.tensor.dtype == tensor.dtype
    ):
        return None
    return stand_in


MaskIndices = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def structured_sdpa_mask(
    original: Callable[..., object], stand_ins: dict[int, StandIn]
) -> Callable[..., object]:
    """``sdpa_mask`` that hands back a stand-in instead of the dense mask where the mask
    function is one :mod:`._mask_function` models.

    transformers' own ``sdpa_mask`` still runs, with the mask function swapped for a
    constant that records the index tensors it is given: so the skip decisions
    (``is_causal`` instead of a mask), the padding it adds and the indices (offsets
    included) are its own. The constant is one element, so what it returns is the
    padding alone, expanded: ``keep[b, k]`` is its ``[b, 0, 0, k]``.
    """
    from probewise.throughput.attention import _mask_function

    signature = inspect.signature(original)
    owner = threading.get_ident()

    def build(*args: object, **kwargs: object) -> object:
        if threading.get_ident() != owner:
            return original(*args, **kwargs)  # another thread's model: not the probe's
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        bound.apply_defaults()
        function = bound.arguments.get("mask_function")
        if bound.arguments.get("use_vmap") or not callable(function):
            return original(*args, **kwargs)
        seen: list[MaskIndices] = []

        def constant(
            batch_idx: torch.Tensor,
            head_idx: torch.Tensor,
            q_idx: torch.Tensor,
            kv_idx: torch.Tensor,
        ) -> torch.Tensor:
            seen.append((batch_idx, head_idx, q_idx, kv_idx))
            return q_idx.new_ones((1, 1, 1, 1), dtype=torch.bool)

        bound.arguments["mask_function"] = constant
        shaped = original(*bound.args, **bound.kwargs)
        if shaped is None:
            return None  # transformers skips the mask: SDPA gets is_causal
        mask_function: _mask_function.MaskFunction = function
        if (
            len(seen) != 1
            or not isinstance(shaped, torch.Tensor)
            or shaped.ndim != 4
            or shaped.dtype != torch.bool
        ):
            return original(*args, **kwargs)
        keep = np.ascontiguousarray(shaped[:, 0, 0, :].numpy())
        intervals = _mask_function.row_intervals(mask_function, seen[0], keep)
        built = _mask_function.would_build_shape(mask_function, seen[0])
        if (
            intervals is None
            or built is None
            or intervals.shape
            != (
                shaped.shape[0],
                shaped.shape[2],
                shaped.shape[3],
            )
        ):
            return original(*args, **kwargs)
        padding = [
            size if stride != 0 else 1
            for size, stride in zip(shaped.shape, shaped.stride(), strict=True)
        ]
        shape = np.broadcast_shapes(built, tuple(padding))
        tensor = torch.ones((1, 1, 1, 1), dtype=torch.bool).expand(shaped.shape)
        stand_ins[tensor.untyped_storage().data_ptr()] = StandIn(
            tensor=tensor, intervals=intervals, nbytes=int(np.prod(shape, dtype=np.int64))
        )
        return tensor

    return build


@contextlib.contextmanager
def structured_masks(stand_ins: dict[int, StandIn], *, enabled: bool) -> Generator[None]:
    """Swap :func:`structured_sdpa_mask` in as transformers' SDPA mask builder."""
    if not enabled:
        yield
        return
    from transformers import masking_utils

    # The class-wide mapping every model reads (``register`` writes to it; a fresh
    # instance, with no local overrides, reads from it).
    interface = masking_utils.AttentionMaskInterface
    register = cast(
        "Callable[[str, Callable[..., object]], None]",
        interface.register,  # pyright: ignore[reportUnknownMemberType]
    )
    fresh = cast("Callable[[], Mapping[str, Callable[..., object]]]", interface)
    with _MASK_LOCK:
        original = fresh()["sdpa"]
        register("sdpa", structured_sdpa_mask(original, stand_ins))
        try:
            yield
        finally:
            register("sdpa", original)
