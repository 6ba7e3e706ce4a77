"""What the mask probe's recorder hands back: each attention call of one forward, and
each distinct mask those calls passed, as plain values (no torch here).

:mod:`._recorder` makes them; :mod:`._bounds` repeats a deep config's calls; the report
(:mod:`.masks`) reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import attrs
import numpy as np
import numpy.typing as npt

from probewise.throughput.attention._band import RowIntervals
from probewise.throughput.attention._paths import FlashCall

__all__ = ["RawCall", "RecordedRun"]


@final
@attrs.frozen(kw_only=True)
class RawCall:
    """One recorded SDPA call, as plain numbers (internal)."""

    layer_index: int
    layer_type: str
    sliding_window: int | None
    chunk_size: int | None
    """The layer's ``attention_chunk_size`` when it is a ``"chunked_attention"`` layer."""
    kv_groups: int
    query_shape: tuple[int, int, int, int]
    key_shape: tuple[int, int, int, int]
    value_shape: tuple[int, int, int, int]
    dtype: str
    mask_id: int | None
    mask_dtype_bool: bool
    mask_shape: tuple[int, ...] | None
    is_causal: bool
    dropout: float
    enable_gqa: bool
    softcap: float | None = None
    """The logit soft-capping the layer passed to its attention function, if any."""
    sinks: bool = False
    """The layer has attention sinks (``s_aux``)."""
    flash: FlashCall | None = None
    """For a flash implementation: the kernel call transformers' flash helpers made."""


@final
@attrs.frozen(kw_only=True)
class RecordedRun:
    """The calls of one forward, with each distinct mask read as a boolean array."""

    model_type: str
    architecture: str
    calls: tuple[RawCall, ...]
    masks: Mapping[int, npt.NDArray[np.bool_] | RowIntervals]
    """``mask_id`` -> ``allowed[b, q, k]`` (heads collapsed when they agree), dense or
    as row intervals."""
    mask_bytes: Mapping[int, int]
    heads_differ: frozenset[int]
    """Mask ids whose heads carry different masks (read from head 0)."""
    kv_cache: bool
    """Whether the forward returned a KV cache (``use_cache`` was in effect)."""
    attn_implementation: str = "sdpa"
    """The attention implementation that ran (resolved from the config's when not given)."""
