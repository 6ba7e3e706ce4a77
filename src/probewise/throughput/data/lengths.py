"""Length distribution, padding waste and cross-entropy chunk sizing, from the data alone.

These probes run before a job: no GPU, no weights. Lengths come in as a sequence or
array of ints, or as a :class:`~probewise.throughput.LengthInput` read from a file
(:func:`read_lengths`, :func:`tokenize_lengths`); every value is validated at the
boundary (:func:`as_lengths`) and one bad value rejects the whole input, naming where
it is: nothing is silently dropped.

Conventions
-----------
*Padded slots* are what a batch costs the model: a batch of ``k`` sequences padded
to its longest, ``m``, occupies ``k * m`` token slots; a packed row occupies its full
width. *Waste* is the share of slots that hold padding. *Attention work* counts the
score matrix entries: ``len ** 2`` per real sequence (or per packed piece, under a
block-diagonal mask) against ``k * m ** 2`` per padded batch, or ``T ** 2`` per packed
row of width ``T`` with a full (non-block-diagonal) mask. Causal masking halves both
sides alike, so the shares hold for causal attention too.

Bounds
------
Every length is at most :data:`MAX_LENGTH` (2**40 tokens; see :func:`as_lengths`).
Token counts and attention work are exact Python ints: a sum or product that could
pass 2**62 in ``int64`` is recomputed with Python's unbounded ints (see
:func:`exact_dot`), so no figure can wrap around. Arrays are sized by the number of
sequences, never by their values. Histograms take at most
:data:`MAX_BINS_PER_OCTAVE` (256) bins per octave.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import TypeAlias, cast, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise import _json
from probewise._validation import (
    MAX_LENGTH,
    finite,
    non_negative,
    optional,
    positive,
    shown_int,
)
from probewise.errors import ArgumentTypeValueError, InvalidInputError, LengthInputError
from probewise.throughput.data.ce_chunks import ChunkPlan, LogitsDtype, ce_chunk_plan
from probewise.throughput.data.length_input import LengthInput, as_lengths

# ChunkPlan, LogitsDtype and ce_chunk_plan are defined in ce_chunks and named here too,
# where callers have imported them.
__all__ = [
    "MAX_BINS_PER_OCTAVE",
    "BatchingMode",
    "ChunkPlan",
    "HistogramBin",
    "LengthStats",
    "Lengths",
    "LogitsDtype",
    "PaddingReport",
    "ce_chunk_plan",
    "lengths_array",
    "padding_waste",
]

Lengths: TypeAlias = "Sequence[int] | npt.NDArray[np.generic] | LengthInput"
"""What the length probes accept: ints, an int array, or a :class:`LengthInput`."""


def lengths_array(lengths: Lengths) -> npt.NDArray[np.int64]:
    """The validated, read-only ``int64`` array of ``lengths`` (see :func:`as_lengths`)."""
    if isinstance(lengths, LengthInput):
        return lengths.lengths
    return as_lengths(lengths)


# ---------------------------------------------------------------------------------------
# Exact integer arithmetic

_INT64_SAFE = 2.0**62
"""Sums and products below this (estimated in float64) are computed in int64."""


def exact_dot(*factors: npt.NDArray[np.int64]) -> int:
    """``sum(f0 * f1 * ...)`` of non-negative int64 arrays, exactly, as a Python int.

    In int64 when a float64 estimate of every partial product's sum stays below
    2**62 (half of int64's range: the estimate's rounding cannot hide an overflow),
    and with Python's unbounded ints otherwise. One factor gives the plain sum.
    """
    estimate = factors[0].astype(np.float64)
    largest = float(estimate.sum())
    for factor in factors[1:]:
        estimate = estimate * factor
        largest = max(largest, float(estimate.sum()))
    if largest < _INT64_SAFE:
        product = factors[0]
        for factor in factors[1:]:
            product = product * factor
        return int(product.sum())
    columns: list[list[int]] = [factor.tolist() for factor in factors]
    return sum(math.prod(row) for row in zip(*columns, strict=True))


def exact_max_product(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> int:
    """``max(a * b)`` of non-negative int64 arrays (not empty), exactly."""
    if float((a.astype(np.float64) * b).max()) < _INT64_SAFE:
        return int((a * b).max())
    left: list[int] = a.tolist()
    right: list[int] = b.tolist()
    return max(x * y for x, y in zip(left, right, strict=True))


# ---------------------------------------------------------------------------------------
# Length distribution

MAX_BINS_PER_OCTAVE = 256
"""The most histogram bins per octave :meth:`LengthStats.of` draws.

With lengths at most 2**40 that is at most 40 * 256 + 2 bin edges; finer bins than a
256th of an octave (0.3 %) say nothing a histogram can show.
"""


@final
@attrs.frozen(kw_only=True)
class HistogramBin:
    """Lengths ``lo <= length < hi`` and how many there are."""

    lo: int = attrs.field(validator=positive)
    hi: int = attrs.field(validator=positive)
    count: int = attrs.field(validator=non_negative)

    def __attrs_post_init__(self) -> None:
        if self.hi <= self.lo:
            raise InvalidInputError(f"bin must have hi > lo, got [{self.lo}, {self.hi})")

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready dict."""
        return cast("dict[str, int]", _json.to_dict(self))


def _log_edges(lo: int, hi: int, bins_per_octave: int) -> npt.NDArray[np.int64]:
    """Integer bin edges, geometric with ``bins_per_octave`` per doubling, covering [lo, hi]."""
    k_lo = math.floor(math.log2(lo) * bins_per_octave)
    k_hi = math.floor(math.log2(hi) * bins_per_octave) + 1
    raw = np.round(2.0 ** (np.arange(k_lo, k_hi + 1) / bins_per_octave)).astype(np.int64)
    edges = np.unique(raw)
    # The first edge must not exceed the minimum and the last must exceed the maximum.
    edges = edges[edges > 0]
    if edges[0] > lo:
        edges = np.concatenate([np.array([lo], dtype=np.int64), edges])
    while edges[-1] <= hi:
        edges = np.concatenate([edges, np.array([max(edges[-1] + 1, hi + 1)], dtype=np.int64)])
    first = int(np.searchsorted(edges, lo, side="right")) - 1
    last = int(np.searchsorted(edges, hi, side="right"))
    return edges[first : last + 1]


@final
@attrs.frozen(kw_only=True)
class LengthStats:
    """Summary of a length distribution, with a histogram on log-spaced bins.

    Percentiles use linear interpolation between order statistics (numpy's
    default); ``std`` is the population standard deviation.
    """

    count: int = attrs.field(validator=positive)
    total_tokens: int = attrs.field(validator=positive)
    mean: float = attrs.field(validator=finite)
    std: float = attrs.field(validator=finite)
    min: int = attrs.field(validator=positive)
    max: int = attrs.field(validator=positive)
    p50: float = attrs.field(validator=finite)
    p90: float = attrs.field(validator=finite)
    p99: float = attrs.field(validator=finite)
    histogram: tuple[HistogramBin, ...]

    def __attrs_post_init__(self) -> None:
        if not self.min <= self.p50 <= self.p90 <= self.p99 <= self.max:
            raise InvalidInputError("need min <= p50 <= p90 <= p99 <= max")
        if sum(b.count for b in self.histogram) != self.count:
            raise InvalidInputError("histogram counts must add up to count")

    @classmethod
    def of(cls, lengths: Lengths, *, bins_per_octave: int = 2) -> LengthStats:
        """Statistics of ``lengths``; the histogram has ``bins_per_octave`` bins per doubling.

        Raises :class:`~probewise.errors.LengthInputError` for bad lengths (empty,
        zero, negative, NaN, non-integral), naming the first bad one.
        """
        if isinstance(bins_per_octave, bool) or not isinstance(bins_per_octave, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeValueError(
                f"bins_per_octave must be an int, got a {type(bins_per_octave).__name__}"
            )
        if not 1 <= bins_per_octave <= MAX_BINS_PER_OCTAVE:
            raise InvalidInputError(
                f"bins_per_octave must be between 1 and {MAX_BINS_PER_OCTAVE}, got "
                f"{shown_int(bins_per_octave)}"
            )
        values = lengths_array(lengths)
        lo, hi = int(values.min()), int(values.max())
        edges = _log_edges(lo, hi, bins_per_octave)
        counts = np.histogram(values, bins=edges)[0]
        # np.histogram closes the last bin; our last edge is > max, so it is half-open too.
        p50, p90, p99 = (float(p) for p in np.percentile(values, [50.0, 90.0, 99.0]))
        return cls(
            count=int(values.size),
            total_tokens=exact_dot(values),
            mean=float(values.mean()),
            std=float(values.std()),
            min=lo,
            max=hi,
            p50=p50,
            p90=p90,
            p99=p99,
            histogram=tuple(
                HistogramBin(lo=int(a), hi=int(b), count=int(c))
                for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True)
            ),
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return _json.to_dict(self)


# ---------------------------------------------------------------------------------------
# Padding waste


@enum.unique
class BatchingMode(enum.Enum):
    """How the sequences were put into batches for a :class:`PaddingReport`."""

    EXPLICIT = "explicit"
    """The caller's own batches (sequences of indices)."""
    BATCH_SIZE = "batch_size"
    """Consecutive runs of ``batch_size`` sequences in the given order (the last may be short)."""
    TOKEN_BUDGET = "token_budget"
    """Greedy in the given order: a batch grows while ``count * longest <= tokens_per_batch``."""
    PACKED = "packed"
    """Concatenated and cut into rows of ``pack_to`` tokens (sequences split across rows)."""


@_json.shaped(
    _json.Shape(
        after={
            "pad_tokens": "slot_tokens",
            "waste_share": "pad_tokens",
            "efficiency": "waste_share",
            "real_tokens_per_batch": "largest_batch_slots",
            "attention_share": "attention_slots",
        }
    )
)
@final
@attrs.frozen(kw_only=True)
class PaddingReport:
    """Real tokens against the token slots a batching costs, and the attention work.

    ``slot_tokens`` is what the model computes on (each batch padded to its longest
    sequence, or each packed row at full width); ``waste_share`` is the padded share
    of it and ``efficiency`` the real share (``1 - waste_share``). ``attention_real``
    is the sum of ``len ** 2`` over real sequences (over packed pieces, for packing:
    the block-diagonal mask's work), ``attention_slots`` the work of the padded
    batches (``size * longest ** 2`` each) or of full packed rows (``T ** 2`` each).
    """

    mode: BatchingMode
    n_sequences: int = attrs.field(validator=non_negative)
    """Sequences placed in a batch."""
    n_batches: int = attrs.field(validator=non_negative)
    """Batches (rows, for packing)."""
    real_tokens: int = attrs.field(validator=non_negative)
    slot_tokens: int = attrs.field(validator=non_negative)
    largest_batch_slots: int = attrs.field(validator=non_negative)
    """Token slots of the costliest batch: the logits a step must hold at once."""
    attention_real: int = attrs.field(validator=non_negative)
    attention_slots: int = attrs.field(validator=non_negative)
    unbatched: int = attrs.field(default=0, validator=non_negative)
    """Sequences that no explicit batch contains (counted, never silently ignored)."""
    oversize: int = attrs.field(default=0, validator=non_negative)
    """Sequences longer than ``tokens_per_batch`` (each given a batch of its own)."""
    split_sequences: int = attrs.field(default=0, validator=non_negative)
    """Packed sequences cut across a row boundary."""
    batch_size: int | None = attrs.field(default=None, validator=optional(positive))
    tokens_per_batch: int | None = attrs.field(default=None, validator=optional(positive))
    pack_to: int | None = attrs.field(default=None, validator=optional(positive))

    def __attrs_post_init__(self) -> None:
        if self.slot_tokens < self.real_tokens:
            raise InvalidInputError("slot_tokens must be >= real_tokens")
        if self.attention_slots < self.attention_real:
            raise InvalidInputError("attention_slots must be >= attention_real")

    @property
    def pad_tokens(self) -> int:
        """Token slots holding padding."""
        return self.slot_tokens - self.real_tokens

    @property
    def waste_share(self) -> float:
        """Padded share of the token slots (0 when there are none)."""
        return self.pad_tokens / self.slot_tokens if self.slot_tokens else 0.0

    @property
    def efficiency(self) -> float:
        """Real share of the token slots (``1 - waste_share``)."""
        return 1.0 - self.waste_share

    @property
    def attention_share(self) -> float:
        """Real attention work over the work the batches cost (1 when there is none)."""
        return self.attention_real / self.attention_slots if self.attention_slots else 1.0

    @property
    def real_tokens_per_batch(self) -> float:
        """Mean real tokens per batch: the effective tokens per step."""
        return self.real_tokens / self.n_batches if self.n_batches else 0.0

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict, derived figures included."""
        return _json.to_dict(self)


def _batch_figures(
    sorted_lengths: npt.NDArray[np.int64], starts: npt.NDArray[np.int64]
) -> tuple[int, int, int, int]:
    """(slot tokens, largest batch slots, attention real, attention slots) of contiguous batches.

    ``sorted_lengths`` holds the lengths in batch order; batch ``b`` is
    ``sorted_lengths[starts[b]:starts[b + 1]]``. Exact integer arithmetic
    (:func:`exact_dot`): a batch's slots, ``size * longest``, and the squares' sums
    can pass 2**63 for long sequences.
    """
    if starts.size == 0:
        return 0, 0, 0, 0
    maxes = np.maximum.reduceat(sorted_lengths, starts)
    sizes = np.diff(np.append(starts, sorted_lengths.size))
    return (
        exact_dot(sizes, maxes),
        exact_max_product(sizes, maxes),
        exact_dot(sorted_lengths, sorted_lengths),
        exact_dot(sizes, maxes, maxes),
    )


def _explicit_batches(
    values: npt.NDArray[np.int64], batches: Sequence[Sequence[int] | npt.NDArray[np.generic]]
) -> PaddingReport:
    n = values.size
    pieces: list[npt.NDArray[np.int64]] = []
    for number, batch in enumerate(batches):
        indices = np.asarray(batch)
        if indices.ndim != 1 or indices.size == 0:
            raise InvalidInputError(f"batch {number} must be a non-empty 1-D sequence of indices")
        if indices.dtype.kind not in "iu":
            raise InvalidInputError(
                f"batch {number} holds {indices.dtype} values; indices must be integers"
            )
        bad = np.flatnonzero((indices < 0) | (indices >= n))
        if bad.size:
            raise InvalidInputError(
                f"batch {number} holds index {int(indices[bad[0]])}, outside 0..{n - 1}"
            )
        pieces.append(indices.astype(np.int64, copy=False))
    if not pieces:
        raise InvalidInputError("no batches given")
    flat = np.concatenate(pieces)
    seen = np.bincount(flat, minlength=n)
    repeated = np.flatnonzero(seen > 1)
    if repeated.size:
        raise InvalidInputError(
            f"index {int(repeated[0])} appears in more than one batch ({int(seen[repeated[0]])} "
            "times); a batching places each sequence once (pass one epoch at a time)"
        )
    sizes = np.array([p.size for p in pieces], dtype=np.int64)
    starts = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)[:-1]])
    ordered = values[flat]
    slots, largest, att_real, att_slots = _batch_figures(ordered, starts)
    return PaddingReport(
        mode=BatchingMode.EXPLICIT,
        n_sequences=int(flat.size),
        n_batches=len(pieces),
        real_tokens=exact_dot(ordered),
        slot_tokens=slots,
        largest_batch_slots=largest,
        attention_real=att_real,
        attention_slots=att_slots,
        unbatched=int(n - flat.size),
    )


def _token_budget_starts(values: npt.NDArray[np.int64], budget: int) -> tuple[list[int], int]:
    """Greedy batch starts under a padded-token budget, and the oversize count."""
    starts: list[int] = []
    oversize = 0
    count = 0
    longest = 0
    for i, length in enumerate(values.tolist()):
        if length > budget:
            oversize += 1
        grown = max(longest, length)
        if count and (count + 1) * grown > budget:
            starts.append(i)
            count, longest = 1, length
        else:
            if not count:
                starts.append(i)
            count += 1
            longest = grown
    return starts, oversize


_MAX_PACKED_TOTAL = 1 << 62
"""Packing places every token at an int64 offset: the lengths' total must stay below 2**62."""


def _packed(values: npt.NDArray[np.int64], width: int) -> PaddingReport:
    total = exact_dot(values)
    if total >= _MAX_PACKED_TOTAL:
        raise LengthInputError(
            f"the lengths add up to {total:,} tokens, more than packing can place "
            "(2**62 token offsets)"
        )
    ends = np.cumsum(values)
    begins = ends - values
    rows = -(-total // width)
    first_row = begins // width
    last_row = (ends - 1) // width
    split = first_row != last_row
    # Pieces of a split sequence: the head in its first row, the tail in its last, and
    # whole rows in between; unsplit sequences are one piece.
    head = (first_row + 1) * width - begins
    tail = ends - last_row * width
    middle = np.maximum(last_row - first_row - 1, 0)
    head, tail, middle, whole = head[split], tail[split], middle[split], values[~split]
    attention_real = (
        exact_dot(head, head)
        + exact_dot(tail, tail)
        + exact_dot(middle) * width * width
        + exact_dot(whole, whole)
    )
    return PaddingReport(
        mode=BatchingMode.PACKED,
        n_sequences=int(values.size),
        n_batches=rows,
        real_tokens=total,
        slot_tokens=rows * width,
        largest_batch_slots=width,
        attention_real=attention_real,
        attention_slots=rows * width * width,
        split_sequences=int(split.sum()),
        pack_to=width,
    )


def padding_waste(
    lengths: Lengths,
    batches: Sequence[Sequence[int] | npt.NDArray[np.generic]] | None = None,
    *,
    batch_size: int | None = None,
    tokens_per_batch: int | None = None,
    pack_to: int | None = None,
) -> PaddingReport:
    """Padding waste of one batching of ``lengths``; give exactly one way to batch.

    Args:
        lengths: the sequence lengths (ints, an int array or a :class:`LengthInput`).
        batches: the caller's batching: sequences of indices into ``lengths``. Each
            sequence may appear in at most one batch; ones that appear in none are
            counted in :attr:`PaddingReport.unbatched`.
        batch_size: consecutive runs of this many sequences in the given order (the
            last batch may be short, and is counted).
        tokens_per_batch: greedy batches in the given order, each as large as fits
            ``count * longest <= tokens_per_batch``; a longer sequence gets a batch of
            its own and is counted in :attr:`PaddingReport.oversize`.
        pack_to: concatenate the sequences in order and cut rows of this many tokens
            (the usual ``group_texts`` packing): efficiency, split sequences, and
            the attention work of a block-diagonal mask against full rows.

    Raises:
        LengthInputError: a bad length (naming the first).
        InvalidInputError: no batching or more than one given, a bad index, or an
            index in two batches.
    """
    given = sum(x is not None for x in (batches, batch_size, tokens_per_batch, pack_to))
    if given != 1:
        raise InvalidInputError(
            f"give exactly one of batches, batch_size, tokens_per_batch or pack_to ({given} given)"
        )
    values = lengths_array(lengths)
    if batches is not None:
        return _explicit_batches(values, batches)
    if pack_to is not None:
        if pack_to < 1:
            raise InvalidInputError(f"pack_to must be >= 1, got {shown_int(pack_to)}")
        if pack_to > MAX_LENGTH:
            raise InvalidInputError(
                f"pack_to must be at most 2**40 tokens (the longest length), got {shown_int(pack_to)}"
            )
        return _packed(values, pack_to)
    if batch_size is not None:
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be >= 1, got {shown_int(batch_size)}")
        # A batch size beyond the count makes one batch: the same as the count itself.
        step = min(batch_size, int(values.size))
        starts = np.arange(0, values.size, step, dtype=np.int64)
        oversize = 0
        mode = BatchingMode.BATCH_SIZE
    else:
        assert tokens_per_batch is not None
        if tokens_per_batch < 1:
            raise InvalidInputError(f"tokens_per_batch must be >= 1, got {tokens_per_batch}")
        start_list, oversize = _token_budget_starts(values, tokens_per_batch)
        starts = np.array(start_list, dtype=np.int64)
        mode = BatchingMode.TOKEN_BUDGET
    slots, largest, att_real, att_slots = _batch_figures(values, starts)
    return PaddingReport(
        mode=mode,
        n_sequences=int(values.size),
        n_batches=int(starts.size),
        real_tokens=exact_dot(values),
        slot_tokens=slots,
        largest_batch_slots=largest,
        attention_real=att_real,
        attention_slots=att_slots,
        oversize=oversize,
        batch_size=batch_size,
        tokens_per_batch=tokens_per_batch,
    )
