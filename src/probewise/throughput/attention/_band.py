"""The band structure of a boolean attention mask, read with numpy (no torch here).

A mask is ``allowed[b, q, k]``: query ``q`` of batch row ``b`` may attend key ``k``.
The reader works row by row: every query row's allowed keys must be one interval
once the *padding columns* (keys that no query of the batch row attends) are set
aside; then each candidate structure is an interval ``[lo(q), hi(q)]`` per row, and
the mask matches it when the first key, the last key and the count agree with that
interval intersected with the non-padding columns. That costs four passes over the
mask (count, first, last, column-any) and O(batch x length) per candidate, so a
two-row 8,192-token mask is read in well under a second.
"""

from __future__ import annotations

import enum
from typing import assert_never, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise._validation import optional, positive, share
from probewise.errors import InvalidInputError

__all__ = ["Band", "BandKind", "RowIntervals", "analyse_band", "crosses_documents"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@enum.unique
class BandKind(enum.Enum):
    """Which structure an attention mask has (:attr:`Band.kind`)."""

    NONE = "none"
    """No mask tensor reached SDPA: the call's ``is_causal`` alone sets the structure."""
    CAUSAL = "causal"
    """Each query attends every key up to its own position (plain causal)."""
    SLIDING_WINDOW = "sliding_window"
    """Causal, limited to the last :attr:`Band.window` keys (the query's own included)."""
    BLOCK_DIAGONAL = "block_diagonal"
    """Causal within documents (:attr:`Band.segments`) and nothing across them; with a
    :attr:`Band.window` when a sliding window also applies inside the documents."""
    CHUNKED = "chunked"
    """Causal within fixed chunks of :attr:`Band.chunk_size` keys (Llama 4's chunked
    layers, ``attention_chunk_size``) and nothing across them; inside documents
    (:attr:`Band.segments`) when packed documents are also kept apart, and with a
    :attr:`Band.window` when a sliding window also applies inside the chunks."""
    FULL = "full"
    """Every query attends every key (bidirectional)."""
    OTHER = "other"
    """None of the above; :attr:`Band.allowed_share` still says how dense it is."""


def _segments_ok(instance: Band, _attribute: object, value: tuple[tuple[int, ...], ...]) -> None:
    if value and instance.kind not in (BandKind.BLOCK_DIAGONAL, BandKind.CHUNKED):
        raise InvalidInputError("segments are given only for a block-diagonal or chunked band")
    for row in value:
        if not row or any(length < 1 for length in row):
            raise InvalidInputError(f"every segment length must be >= 1, got {row}")


def _window_ok(instance: Band, _attribute: object, value: int | None) -> None:
    if value is not None and instance.kind not in (
        BandKind.SLIDING_WINDOW,
        BandKind.BLOCK_DIAGONAL,
        BandKind.CHUNKED,
    ):
        raise InvalidInputError(
            "a window is given only for a sliding-window, block-diagonal or chunked band"
        )
    if instance.kind is BandKind.SLIDING_WINDOW and value is None:
        raise InvalidInputError("a sliding-window band needs its window")


def _chunk_ok(instance: Band, _attribute: object, value: int | None) -> None:
    if (value is not None) is not (instance.kind is BandKind.CHUNKED):
        raise InvalidInputError("a chunk size is given for a chunked band, and only for one")


def _counts_ok(
    _instance: object, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    if any(count < 0 for count in value):
        raise InvalidInputError(f"{attribute.name} must hold counts >= 0, got {value}")


@final
@attrs.frozen(kw_only=True)
class Band:
    """The structure of one attention mask, per batch row where it can differ."""

    kind: BandKind
    """Which structure it is."""
    window: int | None = attrs.field(default=None, validator=[optional(positive), _window_ok])
    """The sliding window in keys (the query's own included), when one applies."""
    segments: tuple[tuple[int, ...], ...] = attrs.field(default=(), validator=_segments_ok)
    """For a block-diagonal band: the document lengths of each batch row, in order. For
    a chunked band: the documents the chunks sit in, when packed documents are kept
    apart (empty when the chunks run over the whole row)."""
    chunk_size: int | None = attrs.field(default=None, validator=[optional(positive), _chunk_ok])
    """For a chunked band: the chunk in keys (the layer's ``attention_chunk_size``)."""
    padding_columns: tuple[int, ...] = attrs.field(default=(), validator=_counts_ok)
    """Per batch row: keys that no query attends (padding)."""
    masked_rows: tuple[int, ...] = attrs.field(default=(), validator=_counts_ok)
    """Per batch row: queries that attend no key at all (e.g. left padding)."""
    allowed_share: float = attrs.field(default=1.0, validator=share)
    """Share of (query, key) pairs that are allowed, over the whole mask."""

    @property
    def padded(self) -> bool:
        """Whether any padding column or fully masked row is present."""
        return any(self.padding_columns) or any(self.masked_rows)

    def describe(self) -> str:
        """One line for people, e.g. ``"sliding window 1024, 2048 padding columns"``."""
        match self.kind:
            case BandKind.NONE:
                text = "no mask"
            case BandKind.CAUSAL:
                text = "causal"
            case BandKind.SLIDING_WINDOW:
                text = f"sliding window {self.window}"
            case BandKind.BLOCK_DIAGONAL:
                counts = sorted({len(row) for row in self.segments})
                per_row = "/".join(str(c) for c in counts)
                text = f"block-diagonal, {per_row} documents per row"
                if self.window is not None:
                    text += f", sliding window {self.window} inside"
            case BandKind.CHUNKED:
                text = f"chunked, chunks of {self.chunk_size}"
                if self.segments:
                    counts = sorted({len(row) for row in self.segments})
                    per_row = "/".join(str(c) for c in counts)
                    text += f" inside {per_row} documents per row"
                if self.window is not None:
                    text += f", sliding window {self.window} inside"
            case BandKind.FULL:
                text = "full (bidirectional)"
            case BandKind.OTHER:
                text = f"other ({self.allowed_share:.1%} of pairs allowed)"
            case _ as unreachable:  # pragma: no cover
                assert_never(unreachable)
        if any(self.padding_columns):
            text += f", {sum(self.padding_columns)} padding columns"
        if any(self.masked_rows):
            text += f", {sum(self.masked_rows)} fully masked rows"
        return text


def _as_tuple(values: IntArray) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


@final
@attrs.frozen(kw_only=True, eq=False)
class RowIntervals:
    """A mask given by one key interval per query row and the keys each batch row keeps:
    ``allowed[b, q, k] = lo[b, q] <= k <= hi[b, q] and keep[b, k]`` (``hi < lo``: none).

    This is the shape every mask transformers composes from causal, sliding-window,
    packed-document and padding functions has (see
    :mod:`probewise.throughput.attention._mask_function`), stored in O(batch x length) instead
    of O(batch x length^2). :func:`analyse_band` and :func:`crosses_documents` read it
    without building the dense mask, and give what they give for :meth:`dense`.
    """

    lo: IntArray
    """``(batch, queries)``: each row's first key, in ``[0, keys]``."""
    hi: IntArray
    """``(batch, queries)``: each row's last key, in ``[-1, keys - 1]``."""
    keep: BoolArray
    """``(batch, keys)``: the keys the padding leaves."""

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(batch, queries, keys)``, as the dense mask's."""
        batch, queries = self.lo.shape
        return int(batch), int(queries), int(self.keep.shape[1])


def _interval_counts(cum: IntArray, lo: IntArray, hi: IntArray) -> IntArray:
    """Kept keys in ``[lo, hi]`` per row, from the per-batch-row prefix sums ``cum``."""
    b_index = np.arange(cum.shape[0], dtype=np.int64)[:, None]
    keys = cum.shape[1] - 1
    low = np.clip(lo, 0, keys)
    high = np.clip(hi + 1, 0, keys)
    return np.where(high > low, cum[b_index, high] - cum[b_index, np.minimum(low, high)], 0)


@final
@attrs.frozen(kw_only=True, eq=False)
class _Summary:
    """What the band reader needs from a mask, O(batch x length): per query row the
    count of allowed keys, the first and last one (0 and ``keys - 1`` for a row with
    none, as ``argmax`` gives on the dense mask), and per key whether any query
    attends it."""

    count: IntArray
    first: IntArray
    last: IntArray
    column_any: BoolArray
    keys: int


def _dense_summary(allowed: BoolArray) -> _Summary:
    keys = allowed.shape[2]
    count: IntArray = np.count_nonzero(allowed, axis=-1).astype(np.int64)
    first: IntArray = allowed.argmax(axis=-1).astype(np.int64)
    last: IntArray = (keys - 1 - allowed[..., ::-1].argmax(axis=-1)).astype(np.int64)
    column_any: BoolArray = np.asarray(allowed.any(axis=-2))
    return _Summary(count=count, first=first, last=last, column_any=column_any, keys=keys)


def _interval_summary(mask: RowIntervals) -> _Summary:
    """The same numbers as :func:`_dense_summary` on the dense mask: a row's allowed
    keys are the kept keys of ``[lo, hi]``, so its count is a difference of prefix
    sums of ``keep``, its first key the first kept key at or after ``lo`` and its
    last the last kept key at or before ``hi``; a key is attended when it is kept and
    inside some non-empty row's interval (a coverage count by difference array)."""
    batch, _, keys = mask.shape
    keep = mask.keep
    key_index = np.arange(keys, dtype=np.int64)
    cum = np.zeros((batch, keys + 1), dtype=np.int64)
    np.cumsum(keep, axis=-1, out=cum[:, 1:])
    count = _interval_counts(cum, mask.lo, mask.hi)
    rows = count > 0
    b_index = np.arange(batch, dtype=np.int64)[:, None]
    next_kept = np.minimum.accumulate(np.where(keep, key_index, keys)[:, ::-1], axis=-1)[:, ::-1]
    prev_kept = np.maximum.accumulate(np.where(keep, key_index, -1), axis=-1)
    low = np.clip(mask.lo, 0, keys - 1)
    high = np.clip(mask.hi, 0, keys - 1)
    first = np.where(rows, next_kept[b_index, low], 0)
    last = np.where(rows, prev_kept[b_index, high], keys - 1)
    cover = np.zeros((batch, keys + 1), dtype=np.int64)
    starts = np.where(rows, np.clip(mask.lo, 0, keys), keys)
    ends = np.where(rows, np.clip(mask.hi + 1, 0, keys), keys)
    for b in range(batch):
        cover[b] += np.bincount(starts[b], minlength=keys + 1)
        cover[b] -= np.bincount(ends[b], minlength=keys + 1)
    covered = np.cumsum(cover[:, :keys], axis=-1) > 0
    column_any: BoolArray = np.asarray(covered & keep)
    return _Summary(count=count, first=first, last=last, column_any=column_any, keys=keys)


def analyse_band(
    allowed: BoolArray | RowIntervals,
    *,
    chunk_size: int | None = None,
    documents: tuple[int, ...] = (),
) -> Band:
    """Read the structure of ``allowed`` (shape ``(batch, queries, keys)``), dense or as
    row intervals; both give the same band for the same mask (the reader sees only
    the :class:`_Summary`, which both compute exactly).

    ``chunk_size`` is the layer's ``attention_chunk_size`` when it is a chunked layer:
    the mask is then also tried as causal chunks (:attr:`BandKind.CHUNKED`), inside
    ``documents`` (the packed document lengths of every row) and over the whole row.
    A chunk boundary and a document boundary look the same in a mask; told both, the
    reader counts documents as documents and chunks as chunks, and claims neither
    unless the mask matches it exactly.
    """
    if isinstance(allowed, RowIntervals):
        summary = _interval_summary(allowed)
        batch, queries, keys = allowed.shape
    else:
        if allowed.ndim != 3:
            raise InvalidInputError(
                f"a mask of shape (batch, queries, keys) is needed, got {allowed.shape}"
            )
        batch, queries, keys = allowed.shape
        summary = _dense_summary(allowed)
    return _read(summary, (batch, queries, keys), chunk_size, documents)


def _read(
    summary: _Summary,
    shape: tuple[int, int, int],
    chunk_size: int | None,
    documents: tuple[int, ...],
) -> Band:
    batch, queries, keys = shape
    total = batch * queries * keys
    kind, window, segments = _structure(summary, shape, chunk_size, documents)
    return Band(
        kind=kind,
        window=window,
        segments=segments,
        chunk_size=chunk_size if kind is BandKind.CHUNKED else None,
        padding_columns=_as_tuple(keys - summary.column_any.sum(axis=-1)),
        masked_rows=_as_tuple((summary.count == 0).sum(axis=-1)),
        allowed_share=float(summary.count.sum()) / total if total else 1.0,
    )


_Structure = tuple[BandKind, int | None, tuple[tuple[int, ...], ...]]
"""A band's kind, window and segments."""
_OTHER: _Structure = (BandKind.OTHER, None, ())


@final
class _Candidates:
    """Tests a summary's rows against candidate intervals ``[lo(q), hi(q)]``: prefix
    sums of the non-padding columns, and for each key the next and the previous one."""

    def __init__(self, summary: _Summary, cum: IntArray, batch: int, queries: int) -> None:
        keys = summary.keys
        self.summary = summary
        self.cum = cum
        self.batch = batch
        self.queries = queries
        self.rows = summary.count > 0
        self.b_index: IntArray = np.arange(batch, dtype=np.int64)[:, None]
        key_index = np.arange(keys, dtype=np.int64)
        column_any = summary.column_any
        self.next_key = np.minimum.accumulate(
            np.where(column_any, key_index, keys)[:, ::-1], axis=-1
        )[:, ::-1]
        self.prev_key = np.maximum.accumulate(np.where(column_any, key_index, -1), axis=-1)

    def matches(self, lo: IntArray, hi: IntArray) -> bool:
        """Whether every row's allowed keys are the non-padding keys of ``[lo, hi]``."""
        b_index, rows, summary = self.b_index, self.rows, self.summary
        lo = np.broadcast_to(lo, (self.batch, self.queries))
        hi = np.broadcast_to(hi, (self.batch, self.queries))
        expected = self.cum[b_index, hi + 1] - self.cum[b_index, lo]
        if not np.array_equal(expected, summary.count):
            return False
        return bool(
            np.array_equal(summary.first[rows], self.next_key[b_index, lo][rows])
            and np.array_equal(summary.last[rows], self.prev_key[b_index, hi][rows])
        )


def _structure(
    summary: _Summary,
    shape: tuple[int, int, int],
    chunk_size: int | None,
    documents: tuple[int, ...],
) -> _Structure:
    """Which band structure the summarised mask has (the first that matches)."""
    batch, queries, keys = shape
    count, first, last, column_any = (
        summary.count,
        summary.first,
        summary.last,
        summary.column_any,
    )
    if queries != keys or batch * queries * keys == 0 or not count.any():
        return _OTHER  # (nothing allowed at all is "other", not a padded causal mask)
    rows = count > 0
    cum = np.zeros((batch, keys + 1), dtype=np.int64)
    np.cumsum(column_any, axis=-1, out=cum[:, 1:])
    b_index: IntArray = np.arange(batch, dtype=np.int64)[:, None]
    inside = cum[b_index, last + 1] - cum[b_index, first]
    if not np.array_equal(np.where(rows, inside, 0), count):
        return _OTHER  # some row is not one interval of non-padding keys
    candidates = _Candidates(summary, cum, batch, queries)
    matches = candidates.matches
    q_index = np.broadcast_to(np.arange(queries, dtype=np.int64)[None, :], (batch, queries))

    zero = np.zeros((batch, queries), dtype=np.int64)
    # Causal before full: with padding the two can coincide, and causal is the claim
    # a decoder's mask is expected to make.
    if matches(zero, q_index):
        return (BandKind.CAUSAL, None, ())
    if matches(zero, zero + (keys - 1)):
        return (BandKind.FULL, None, ())
    if not np.all(last[rows] <= q_index[rows]):
        return _OTHER  # some query sees a later key: not causal in any sense here
    if chunk_size is not None:
        chunked = _chunked(candidates, first, q_index, chunk_size, documents)
        if chunked is not None:
            return chunked

    # A sliding window: measured on rows whose first key is not next to padding.
    not_after_pad = rows & ((first == 0) | column_any[b_index, np.maximum(first - 1, 0)])
    window = _window_from(q_index, first, not_after_pad) or _window_from(q_index, first, rows)
    if window is not None and window < queries:
        lo = np.maximum(q_index - window + 1, 0)
        if matches(lo, q_index):
            return (BandKind.SLIDING_WINDOW, window, ())

    # Block-diagonal: a document starts where a query's first key is itself.
    starts = (rows & (first == q_index)) | (q_index == 0)
    segment_start = np.maximum.accumulate(np.where(starts, q_index, 0), axis=-1)
    if np.any(starts[:, 1:]):
        if matches(segment_start, q_index):
            return (BandKind.BLOCK_DIAGONAL, None, _segments(starts))
        inner = rows & (first > segment_start)
        inner_window = _window_from(q_index, first, inner)
        if inner_window is not None:
            lo = np.maximum(segment_start, q_index - inner_window + 1)
            if matches(lo, q_index):
                return (BandKind.BLOCK_DIAGONAL, inner_window, _segments(starts))
    return _OTHER


def _chunked(
    candidates: _Candidates,
    first: IntArray,
    q_index: IntArray,
    chunk: int,
    documents: tuple[int, ...],
) -> _Structure | None:
    """The mask as causal chunks of ``chunk`` keys, with a window inside them or not:
    first inside the packed ``documents`` (a grid restarting at each document, as
    transformers' position remap makes it), then over the whole row (a grid starting
    at the row's first attended key, after any left padding). ``None``: neither."""
    batch, queries = q_index.shape
    tries: list[tuple[IntArray, tuple[tuple[int, ...], ...]]] = []
    if len(documents) > 1 and sum(documents) == queries and max(documents) > chunk:
        # (Documents no longer than a chunk are never split: block-diagonal reads them.)
        bounds = np.cumsum(np.asarray((0, *documents[:-1]), dtype=np.int64))
        start = np.repeat(bounds, documents)[None, :]
        tries.append((start + (q_index - start) // chunk * chunk, (tuple(documents),) * batch))
    offset = candidates.next_key[:, :1]  # the first attended key of each row
    tries.append((np.maximum(offset + (q_index - offset) // chunk * chunk, 0), ()))
    for lo, segments in tries:
        if candidates.matches(lo, q_index):
            return (BandKind.CHUNKED, None, segments)
        window = _window_from(q_index, first, candidates.rows & (first > lo))
        if window is not None and candidates.matches(np.maximum(lo, q_index - window + 1), q_index):
            return (BandKind.CHUNKED, window, segments)
    return None


def _window_from(q_index: IntArray, first: IntArray, where: BoolArray) -> int | None:
    if not np.any(where):
        return None
    return int((q_index - first)[where].max()) + 1


def _segments(starts: BoolArray) -> tuple[tuple[int, ...], ...]:
    length = starts.shape[-1]
    out: list[tuple[int, ...]] = []
    for row in starts:
        positions = np.flatnonzero(row).astype(np.int64)
        bounds = np.append(positions, length)
        out.append(_as_tuple(np.diff(bounds)))
    return tuple(out)


def crosses_documents(allowed: BoolArray | RowIntervals, documents: tuple[int, ...]) -> bool:
    """Whether any query attends a key of another document (documents are contiguous,
    the same in every batch row, and cover the row)."""
    if isinstance(allowed, RowIntervals):
        return _intervals_cross(allowed, documents)
    start = 0
    for length in documents:
        end = start + length
        block = allowed[:, start:end, :]
        if block[:, :, :start].any() or block[:, :, end:].any():
            return True
        start = end
    return False


def _intervals_cross(mask: RowIntervals, documents: tuple[int, ...]) -> bool:
    """:func:`crosses_documents` on row intervals: a query of document ``[s, e)`` crosses
    when ``[lo, min(hi, s - 1)]`` or ``[max(lo, e), hi]`` holds a kept key."""
    batch, queries, keys = mask.shape
    bounds = np.cumsum(np.asarray((0, *documents), dtype=np.int64))
    doc = np.repeat(np.arange(len(documents), dtype=np.int64), documents)[:queries]
    start = np.broadcast_to(bounds[doc][None, :], (batch, queries))
    end = np.broadcast_to(bounds[doc + 1][None, :], (batch, queries))
    cum = np.zeros((batch, keys + 1), dtype=np.int64)
    np.cumsum(mask.keep, axis=-1, out=cum[:, 1:])
    before = _interval_counts(cum, mask.lo, np.minimum(mask.hi, start - 1))
    after = _interval_counts(cum, np.maximum(mask.lo, end), mask.hi)
    return bool(np.any(before > 0) or np.any(after > 0))
