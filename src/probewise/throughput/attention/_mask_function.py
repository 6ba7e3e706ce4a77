"""Read a mask function that transformers composed as row intervals, without the dense mask.

transformers (``masking_utils``) builds every decoder mask the same way: a *mask
function* ``f(batch_idx, head_idx, q_idx, kv_idx) -> bool`` composed from a few
primitives, which ``sdpa_mask`` evaluates on every (batch, query, key) triple into a
dense ``(batch, 1, queries, keys)`` tensor. This module recognises those primitives
by their code objects and closure variables, and derives for each query row the one
key interval it allows, plus the keys padding leaves, in O(batch x length):

- ``causal_mask_function``: ``kv <= q``, the interval ``(-inf, q]``;
- ``bidirectional_mask_function``: ``q >= 0``, everything (or nothing for ``q < 0``);
- ``sliding_window_overlay(w)``: ``kv > q - w``, the interval ``[q - w + 1, inf)``;
- ``sliding_window_bidirectional_overlay(w)``: ``|q - kv| <= w``, ``[q - w, q + w]``;
- ``packed_sequence_mask_function(s)``: ``s[b, q] == s[b, kv]``; transformers' ``s`` is
  a running count of document starts, non-decreasing along the row (checked), so the
  keys sharing ``q``'s value are one interval, found by binary search;
- ``chunked_overlay(c, lp)``: ``(kv - lp[b]) // c == (q - lp[b]) // c``, the chunk of
  ``c`` keys that holds ``q``, on a grid that starts after row ``b``'s ``lp[b]`` left
  padding tokens: ``[lo, lo + c - 1]`` with ``lo = lp[b] + (q - lp[b]) // c * c``;
- ``padding_mask_function(p)``: ``p[b, kv]``, a per-batch-row set of kept keys;
- ``and_masks(f, g, ...)``: the intersection of the intervals, the AND of the keeps;
- ``remap_positions_for_packed_sequence(f, pos)``: ``f(pos[b, q], pos[b, kv])``, read
  only inside an ``and_masks`` that also holds the packed-sequence function (which is
  how transformers composes it): inside ``q``'s document the positions rise by exactly
  one per token (checked: that is what makes it one document), so
  ``pos[kv] = pos[q] + (kv - q)`` and ``f``'s interval in positions shifts back to
  key indices by ``q - pos[q]``; the intersection with the document is exact.

Anything else (``or_masks``, blockwise overlays, a caller's own mask
function, ``use_vmap``) is not read here: :func:`row_intervals` returns ``None`` and
the recorder lets transformers build the dense mask as before. So the structured
reading equals the dense one by construction, for every function it accepts, and
the test suite checks that it does against the dense path (``tests/throughput/
test_mask_intervals.py``: transformers' own ``sdpa_mask`` on random lengths, windows,
padding and documents; whole probe reports on random scenarios).
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FunctionType
from typing import cast, final

import attrs
import numpy as np
import numpy.typing as npt
import torch
from transformers import masking_utils

from probewise.throughput.attention._band import RowIntervals

__all__ = ["Evaluated", "row_intervals", "would_build_shape"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_BIG = np.int64(1 << 62)
MaskFunction = Callable[..., object]


def _code(factory: str, *args: object) -> CodeType | None:
    """The code object of the function transformers' ``factory`` returns (``None``
    when this transformers has no such factory)."""
    make = cast("Callable[..., object] | None", getattr(masking_utils, factory, None))
    if make is None:
        return None
    try:
        made = make(*args)
    except Exception:  # a factory whose signature changed: not recognised
        return None
    return made.__code__ if isinstance(made, FunctionType) else None


def _plain(name: str) -> object:
    return getattr(masking_utils, name, None)


_CAUSAL = _plain("causal_mask_function")
_BIDIRECTIONAL = _plain("bidirectional_mask_function")
_ONE = torch.ones((1, 1), dtype=torch.bool)
_AND = _code("and_masks", _CAUSAL)
_SLIDING = _code("sliding_window_overlay", 1)
_SLIDING_BIDIRECTIONAL = _code("sliding_window_bidirectional_overlay", 1)
_PADDING = _code("padding_mask_function", _ONE)
_CHUNKED = _code("chunked_overlay", 1, torch.zeros((1,), dtype=torch.long))
_PACKED = _code("packed_sequence_mask_function", _ONE)
_REMAP = _code("remap_positions_for_packed_sequence", _CAUSAL, _ONE)


def _closure(function: FunctionType) -> dict[str, object]:
    cells = function.__closure__ or ()
    return dict(zip(function.__code__.co_freevars, (c.cell_contents for c in cells), strict=True))


class _Unknown(Exception):
    """A mask function (or a part of one) this reader does not model."""


@final
@attrs.frozen(kw_only=True, eq=False)
class _Rows:
    """Per query row, one key interval in key *values* (``hi < lo``: none), and the
    kept keys by key index (``None``: all)."""

    lo: IntArray
    hi: IntArray
    keep: BoolArray | None


@final
@attrs.frozen(kw_only=True, eq=False)
class _Context:
    batch: int
    kv: IntArray
    """The key values, ``(keys,)``: ``kv_offset + arange(keys)``."""
    batch_index: torch.Tensor
    kv_index: torch.Tensor
    """The key indices exactly as ``sdpa_mask`` passes them (4-D, broadcastable)."""


def _tensor(value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise _Unknown
    return value


def _window(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unknown
    return value


def _segment_bounds(ids: IntArray, where: IntArray) -> tuple[IntArray, IntArray]:
    """For each row ``b`` and index ``where[b, i]``: the first and last index of the run
    of ``ids[b]`` values equal to ``ids[b, where[b, i]]`` (``ids`` non-decreasing)."""
    lo = np.empty(where.shape, dtype=np.int64)
    hi = np.empty(where.shape, dtype=np.int64)
    for b in range(ids.shape[0]):
        value = ids[b, where[b]]
        lo[b] = np.searchsorted(ids[b], value, side="left")
        hi[b] = np.searchsorted(ids[b], value, side="right") - 1
    return lo, hi


def _packed_ids(function: FunctionType, ctx: _Context) -> IntArray:
    ids = _tensor(_closure(function).get("packed_sequence_mask")).detach().cpu().numpy()
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise _Unknown
    ids = ids.astype(np.int64)
    if ids.shape[0] == 1 and ctx.batch > 1:
        ids = np.broadcast_to(ids, (ctx.batch, ids.shape[1]))
    if ids.shape[0] != ctx.batch or np.any(np.diff(ids, axis=-1) < 0):
        raise _Unknown  # not transformers' running document count
    return ids


def _evaluate(function: object, q: IntArray, ctx: _Context) -> _Rows:
    """``function``'s rows for query values ``q`` (``(batch or 1, queries)``)."""
    if function is _CAUSAL and _CAUSAL is not None:
        return _Rows(lo=np.full(q.shape, -_BIG), hi=q, keep=None)
    if function is _BIDIRECTIONAL and _BIDIRECTIONAL is not None:
        return _Rows(lo=np.where(q >= 0, -_BIG, _BIG), hi=np.where(q >= 0, _BIG, -_BIG), keep=None)
    if not isinstance(function, FunctionType):
        raise _Unknown
    code = function.__code__
    if code is _SLIDING:
        window = _window(_closure(function).get("sliding_window"))
        return _Rows(lo=q - window + 1, hi=np.full(q.shape, _BIG), keep=None)
    if code is _SLIDING_BIDIRECTIONAL:
        window = _window(_closure(function).get("sliding_window"))
        return _Rows(lo=q - window, hi=q + window, keep=None)
    if code is _PADDING:
        padding = _tensor(_closure(function).get("padding_mask"))
        kept = padding[ctx.batch_index, ctx.kv_index]  # transformers' own indexing
        keep = kept.reshape(kept.shape[0], -1).detach().cpu().numpy().astype(bool)
        keep = np.broadcast_to(keep, (ctx.batch, ctx.kv.shape[0]))
        return _Rows(lo=np.full(q.shape, -_BIG), hi=np.full(q.shape, _BIG), keep=keep)
    if code is _CHUNKED:
        return _evaluate_chunked(function, q, ctx)
    if code is _PACKED:
        ids = _packed_ids(function, ctx)
        if q.shape[0] != ctx.batch:
            q = np.broadcast_to(q, (ctx.batch, q.shape[1]))
        lo, hi = _segment_bounds(ids, q)
        return _Rows(lo=lo, hi=hi, keep=None)
    if code is _AND:
        return _evaluate_and(function, q, ctx)
    raise _Unknown


def _evaluate_chunked(function: FunctionType, q: IntArray, ctx: _Context) -> _Rows:
    """``chunked_overlay``: the chunk holding each query, on row ``b``'s grid."""
    fields = _closure(function)
    chunk = _window(fields.get("chunk_size"))
    left = _tensor(fields.get("left_padding")).detach().cpu().numpy()
    if chunk < 1 or left.ndim != 1 or not np.issubdtype(left.dtype, np.integer):
        raise _Unknown
    left = left.astype(np.int64)
    if left.shape[0] == 1 and ctx.batch > 1:
        left = np.broadcast_to(left, (ctx.batch,))
    if left.shape[0] != ctx.batch:
        raise _Unknown
    if q.shape[0] != ctx.batch:
        q = np.broadcast_to(q, (ctx.batch, q.shape[1]))
    offset = left[:, None]
    lo = offset + (q - offset) // chunk * chunk
    return _Rows(lo=lo, hi=lo + chunk - 1, keep=None)


def _evaluate_and(function: FunctionType, q: IntArray, ctx: _Context) -> _Rows:
    parts = _closure(function).get("mask_functions")
    if not isinstance(parts, tuple):
        raise _Unknown
    functions = cast("tuple[object, ...]", parts)
    remapped = [f for f in functions if isinstance(f, FunctionType) and f.__code__ is _REMAP]
    packed = [f for f in functions if isinstance(f, FunctionType) and f.__code__ is _PACKED]
    if remapped and not packed:
        raise _Unknown  # a remap outside a document: positions may jump anywhere
    rows = [_evaluate(f, q, ctx) for f in functions if f not in remapped]
    for remap in remapped:
        rows.append(_evaluate_remap(remap, packed, q, ctx))
    lo = np.full(q.shape, -_BIG)
    hi = np.full(q.shape, _BIG)
    keep: BoolArray | None = None
    for row in rows:
        lo = np.maximum(lo, row.lo)
        hi = np.minimum(hi, row.hi)
        if row.keep is not None:
            keep = row.keep if keep is None else keep & row.keep
    return _Rows(lo=lo, hi=hi, keep=keep)


def _evaluate_remap(
    function: FunctionType, packed: list[FunctionType], q: IntArray, ctx: _Context
) -> _Rows:
    """``inner(pos[b, q], pos[b, kv])`` inside ``q``'s document (see the module note)."""
    fields = _closure(function)
    inner = fields.get("mask_function")
    positions = _tensor(fields.get("position_ids")).detach().cpu().numpy()
    if positions.ndim != 2 or not np.issubdtype(positions.dtype, np.integer):
        raise _Unknown
    positions = np.broadcast_to(positions.astype(np.int64), (ctx.batch, positions.shape[-1]))
    for document in packed:
        ids = _packed_ids(document, ctx)
        if ids.shape != positions.shape:
            raise _Unknown
        same = ids[:, 1:] == ids[:, :-1]
        if np.any(same & (np.diff(positions, axis=-1) != 1)):
            raise _Unknown  # a document whose positions do not rise by one per token
    if q.shape[0] != ctx.batch:
        q = np.broadcast_to(q, (ctx.batch, q.shape[1]))
    if np.any(q < 0) or np.any(q >= positions.shape[1]):
        raise _Unknown
    query_positions = np.take_along_axis(positions, q, axis=-1)
    rows = _evaluate(inner, query_positions, ctx)
    if rows.keep is not None:
        raise _Unknown  # a key set indexed by positions, not keys
    shift = q - query_positions
    lo = np.where(rows.lo <= -_BIG, -_BIG, rows.lo + shift)
    hi = np.where(rows.hi >= _BIG, _BIG, rows.hi + shift)
    return _Rows(lo=lo, hi=hi, keep=None)


@final
@attrs.frozen(kw_only=True, eq=False)
class Evaluated:
    """A mask function read as row intervals, and the dense tensor transformers would
    build for it (its shape before ``expand``, whose elements are its bytes)."""

    intervals: RowIntervals
    built_shape: tuple[int, ...]


def _values(index: torch.Tensor) -> IntArray:
    values: IntArray = index.reshape(-1).detach().cpu().numpy().astype(np.int64)
    return values


def would_build_shape(
    function: MaskFunction, indices: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
) -> tuple[int, ...] | None:
    """The shape ``function`` returns on the full index tensors, read from a call on
    their first two queries and keys: a dimension the function does not broadcast
    over stays 1 on both (``None`` when the call fails or is not boolean)."""
    batch_index, head_index, q_index, kv_index = indices
    small_q = q_index[..., :2, :]
    small_kv = kv_index[..., :2]
    try:
        out = function(batch_index, head_index, small_q, small_kv)
    except Exception:
        return None
    if not isinstance(out, torch.Tensor) or out.dtype != torch.bool or out.ndim != 4:
        return None
    full = (batch_index.shape[0], head_index.shape[1], q_index.shape[2], kv_index.shape[3])
    small = (batch_index.shape[0], head_index.shape[1], small_q.shape[2], small_kv.shape[3])
    shape: list[int] = []
    for got, whole, sample in zip(out.shape, full, small, strict=True):
        if got == sample:
            shape.append(whole)
        elif got == 1:
            shape.append(1)
        else:
            return None
    return tuple(shape)


def row_intervals(
    function: MaskFunction,
    indices: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    keep: BoolArray,
) -> RowIntervals | None:
    """``function`` on ``sdpa_mask``'s index tensors as row intervals (key indices),
    with ``keep`` (the padding ``sdpa_mask`` adds, ``(batch, keys)``) applied; ``None``
    when the function is not one this module models."""
    batch_index, _head_index, q_index, kv_index = indices
    q = _values(q_index)[None, :]
    kv = _values(kv_index)
    batch = int(batch_index.shape[0])
    if kv.size == 0 or not np.array_equal(kv, kv[0] + np.arange(kv.size, dtype=np.int64)):
        return None
    ctx = _Context(batch=batch, kv=kv, batch_index=batch_index, kv_index=kv_index)
    try:
        rows = _evaluate(function, q, ctx)
    except _Unknown:
        return None
    keys = int(kv.size)
    lo = np.broadcast_to(np.clip(rows.lo - kv[0], 0, keys), (batch, q.shape[1]))
    hi = np.broadcast_to(np.clip(rows.hi - kv[0], -1, keys - 1), (batch, q.shape[1]))
    kept = keep if rows.keep is None else keep & rows.keep
    return RowIntervals(
        lo=np.ascontiguousarray(lo), hi=np.ascontiguousarray(hi), keep=np.asarray(kept)
    )
