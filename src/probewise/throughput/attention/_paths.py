"""Which kernel path a layer's attention takes, per implementation (no torch here).

:class:`KernelPath` is the implementation-neutral part of a layer's report: what
runs and why, in one line. :class:`FlexBlocks` is what ``flex_attention``'s
``BlockMask`` holds for the layer's mask: torch splits the (query, key) grid into
blocks of 128 x 128 and computes only the blocks with an allowed pair, the *full*
ones (every pair allowed) without evaluating the mask. :func:`flex_blocks` derives
those counts and the ``BlockMask``'s bytes from the mask transformers composed (read
as row intervals or dense), without building it.
"""

from __future__ import annotations

from typing import final

import attrs
import numpy as np
import numpy.typing as npt

from probewise._validation import non_negative, positive
from probewise.throughput.attention._band import RowIntervals

__all__ = ["BLOCK_SIZE", "FlashCall", "FlexBlocks", "KernelPath", "blockmask_bytes", "flex_blocks"]

BLOCK_SIZE = 128
"""torch's default ``BlockMask`` block size (``_DEFAULT_SPARSE_BLOCK_SIZE``)."""
IntArray = npt.NDArray[np.int64]


@final
@attrs.frozen(kw_only=True)
class FlexBlocks:
    """A ``flex_attention`` ``BlockMask``, counted (:attr:`KernelPath.blocks`)."""

    block_size: int = attrs.field(validator=positive)
    """Queries and keys per block (torch's default, 128)."""
    total: int = attrs.field(validator=non_negative)
    """Blocks in the grid, over the batch: ``batch x ceil(q/128) x ceil(k/128)``."""
    full: int = attrs.field(validator=non_negative)
    """Blocks whose every pair is allowed: computed without the mask function."""
    partial: int = attrs.field(validator=non_negative)
    """Blocks with some allowed and some masked pairs: computed with it."""
    nbytes: int = attrs.field(validator=non_negative)
    """Bytes of the ``BlockMask``'s index tensors (int32): what flex allocates in place
    of a dense mask."""

    @property
    def computed_share(self) -> float:
        """Share of the blocks that are computed (full or partial)."""
        return (self.full + self.partial) / self.total if self.total else 0.0


@final
@attrs.frozen(kw_only=True)
class KernelPath:
    """Which kernel a layer's attention runs, under its implementation, and why."""

    implementation: str
    """The ``attn_implementation`` (``"sdpa"``, ``"eager"``, ``"flex_attention"``,
    ``"flash_attention_2"``, ...)."""
    description: str
    """One line for people: the kernel path and the reason for it."""
    fused: bool
    """A fused attention kernel runs with no dense mask (flash or cuDNN through SDPA,
    flex, FlashAttention); ``False`` for eager and for SDPA's masked or math paths."""
    predicted: bool
    """The kernel was not run: the path is derived from what transformers passes it
    (FlashAttention, through its own helpers with stand-in kernels; SDPA's backend
    choice, by :func:`~probewise.throughput.attention.sdpa.predict_backend`)."""
    blocks: FlexBlocks | None = None
    """For ``flex_attention``: the layer's ``BlockMask``, counted."""


@final
@attrs.frozen(kw_only=True)
class FlashCall:
    """What the (stand-in) flash kernel was called with, for one attention layer."""

    varlen: bool
    """The varlen kernel ran (else the plain kernel over whole, padded rows)."""
    cu_seqlens: tuple[int, ...]
    """The varlen call's cumulative query lengths over the flattened batch (empty
    for the plain kernel)."""
    causal: bool
    window: int | None
    """The sliding window the kernel got (``window_size[0] + 1``), if any."""
    softcap: float | None
    """The logit soft-capping the kernel got, if any."""
    sinks_passed: bool
    """Attention sinks (``s_aux``) reached the kernel."""


def blockmask_bytes(batch: int, queries: int, keys: int, block: int = BLOCK_SIZE) -> int:
    """Bytes of the int32 index tensors of a ``BlockMask`` for ``batch`` rows, one
    head slot (transformers passes ``H=None``): ``kv_num_blocks``, ``kv_indices``,
    their ``full_`` twins, and the transposed ``q_`` four."""
    q_blocks = -(-queries // block)
    k_blocks = -(-keys // block)
    elements = 2 * (q_blocks + q_blocks * k_blocks) + 2 * (k_blocks + k_blocks * q_blocks)
    return 4 * batch * elements


def _block_counts(mask: npt.NDArray[np.bool_] | RowIntervals, block: int) -> IntArray:
    """Allowed pairs per block, ``(batch, q_blocks, k_blocks)``."""
    if not isinstance(mask, RowIntervals):
        batch, queries, keys = mask.shape
        qb, kb = -(-queries // block), -(-keys // block)
        padded = np.zeros((batch, qb * block, kb * block), dtype=np.int64)
        padded[:, :queries, :keys] = mask
        summed: IntArray = padded.reshape(batch, qb, block, kb, block).sum(axis=(2, 4))
        return summed
    batch, queries, keys = mask.shape
    qb, kb = -(-queries // block), -(-keys // block)
    counts = np.zeros((batch, qb, kb), dtype=np.int64)
    q_block = np.arange(queries, dtype=np.int64) // block
    for b in range(batch):
        _row_block_counts(mask, b, block, q_block, counts[b])
    return counts


def _row_block_counts(
    mask: RowIntervals, b: int, block: int, q_block: IntArray, out: IntArray
) -> None:
    """Batch row ``b``'s counts into ``out`` (``(q_blocks, k_blocks)``) in O(queries +
    blocks): the key blocks a query's interval covers whole add the block's kept keys
    (a difference array along the key blocks, per query block); the one or two blocks
    its ends cut add the kept keys of the cut."""
    keys = mask.keep.shape[1]
    kb = out.shape[1]
    cum = np.zeros(keys + 1, dtype=np.int64)
    np.cumsum(mask.keep[b], out=cum[1:])
    edges = np.minimum(np.arange(kb + 1, dtype=np.int64) * block, keys)
    kept = np.diff(cum[edges])  # kept keys per key block
    lo = np.clip(mask.lo[b], 0, keys)
    hi = np.clip(mask.hi[b], -1, keys - 1)
    rows = np.flatnonzero(hi >= lo)
    lo, hi, qs = lo[rows], hi[rows], q_block[rows]
    first_whole = -(-lo // block)  # the first block starting at or after lo
    last_whole = (hi + 1) // block - 1
    last_whole[hi + 1 == keys] = kb - 1  # the ragged last block ends at the last key
    whole = first_whole <= last_whole
    spans = np.zeros((out.shape[0], kb + 1), dtype=np.int64)
    np.add.at(spans, (qs[whole], first_whole[whole]), 1)
    np.add.at(spans, (qs[whole], last_whole[whole] + 1), -1)
    out += np.cumsum(spans[:, :kb], axis=1) * kept[None, :]
    low_block, high_block = lo // block, hi // block
    low_cut = low_block < first_whole  # lo's block is cut (or holds the whole interval)
    same = low_cut & (low_block == high_block)
    low_end = np.minimum(hi, (low_block + 1) * block - 1)
    low_end[same] = hi[same]
    np.add.at(out, (qs[low_cut], low_block[low_cut]), (cum[low_end + 1] - cum[lo])[low_cut])
    high_cut = (high_block > last_whole) & ~same
    start = high_block * block
    np.add.at(out, (qs[high_cut], high_block[high_cut]), (cum[hi + 1] - cum[start])[high_cut])


def flex_blocks(mask: npt.NDArray[np.bool_] | RowIntervals, block: int = BLOCK_SIZE) -> FlexBlocks:
    """The ``BlockMask`` counts of ``mask`` (``(batch, queries, keys)``, dense or row
    intervals): a block is full when all its ``block x block`` pairs are allowed, so
    a ragged last block (past the sequence's end) is never full, as in torch."""
    batch, queries, keys = mask.shape
    counts = _block_counts(mask, block)
    full = int(np.count_nonzero(counts == block * block))
    partial = int(np.count_nonzero((counts > 0) & (counts < block * block)))
    return FlexBlocks(
        block_size=block,
        total=int(counts.size),
        full=full,
        partial=partial,
        nbytes=blockmask_bytes(batch, queries, keys, block),
    )
