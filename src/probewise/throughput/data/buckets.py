"""Bucketed batching and the bucket-size sweep, with the no-op guard.

Three ways to batch, each a :class:`Batching` (a training order cut into batches):

* :func:`random_batches`: a random permutation cut into runs of ``batch_size``,
  batch order shuffled: the baseline.
* :func:`bucket_batches`: length-range buckets of width ``bucket_size`` tokens
  (bucket ``k`` holds lengths ``k * w + 1 .. (k + 1) * w``), samples shuffled
  *inside* each bucket, batches drawn within a bucket (a bucket's last batch may be
  short), batch order shuffled across buckets.
* :func:`megabatch_batches`: HF-style grouping (``get_length_grouped_indices``): a
  random permutation split into megabatches of ``megabatch * batch_size``, each
  sorted by length (longest first) and cut into batches. Unlike HF this does not
  move the longest batch to the front (HF does that to fail fast on memory); batch
  compositions are the same.

:func:`sweep_buckets` scores a row per bucket size against the random baseline and
the megabatch grouping. It guards against the trap that made the first version of
this probe a no-op: bucketing by length range and then *re-sorting* inside each
bucket collapses every bucket size to one global sort, so every size gives the
same batches. When two sizes that partition the lengths into different buckets give
identical batch compositions, :class:`~probewise.errors.SweepNoOpError` is raised.

Every strategy draws from ``numpy.random.default_rng(seed)`` in the same order (a
sample permutation, then a batch permutation), so rows of one sweep are paired: a
bucket width covering the whole length range reproduces the random baseline
exactly.
"""

from __future__ import annotations

import enum
import hashlib
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise import _json
from probewise._validation import non_negative, optional, share
from probewise.errors import ArgumentTypeValueError, InvalidInputError, SweepNoOpError
from probewise.throughput.data._checks import read_only
from probewise.throughput.data.length_input import MAX_LENGTH, LengthInput
from probewise.throughput.data.lengths import Lengths, exact_dot, lengths_array

__all__ = [
    "Batcher",
    "Batching",
    "BucketRow",
    "BucketStrategy",
    "BucketSweep",
    "bucket_batches",
    "megabatch_batches",
    "random_batches",
    "sweep_buckets",
]

IntArray: TypeAlias = npt.NDArray[np.int64]


def _int_array(values: Sequence[int] | npt.NDArray[np.generic]) -> IntArray:
    """A read-only int64 copy of ``values``."""
    try:
        return read_only(np.array(values, dtype=np.int64))
    except (TypeError, ValueError, OverflowError):
        raise ArgumentTypeValueError(
            f"order and starts must be sequences of ints, got a {type(values).__name__}"
        ) from None


@final
@attrs.frozen(kw_only=True, eq=False)
class Batching:
    """A training order cut into batches: batch ``b`` is ``order[starts[b]:starts[b + 1]]``.

    ``order`` must be a permutation of ``range(n)`` (every sample placed exactly once:
    nothing lost) and ``starts`` strictly increasing from 0. Both are stored
    read-only.
    """

    order: IntArray = attrs.field(converter=_int_array)
    starts: IntArray = attrs.field(converter=_int_array)

    def __attrs_post_init__(self) -> None:
        n = self.order.size
        if self.order.ndim != 1 or self.starts.ndim != 1:
            raise InvalidInputError("order and starts must be 1-D")
        if n and (self.starts.size == 0 or self.starts[0] != 0):
            raise InvalidInputError("starts must begin at 0")
        if self.starts.size and (
            np.any(np.diff(self.starts) <= 0) or int(self.starts[-1]) >= max(n, 1)
        ):
            raise InvalidInputError("starts must be strictly increasing and inside the order")
        if n and (
            int(self.order.min()) < 0
            or int(self.order.max()) >= n
            or np.any(np.bincount(self.order, minlength=n) != 1)
        ):
            raise InvalidInputError("order must be a permutation of range(n): each sample once")

    @property
    def n_batches(self) -> int:
        """How many batches."""
        return int(self.starts.size)

    def sizes(self) -> IntArray:
        """Samples per batch."""
        return np.diff(np.append(self.starts, self.order.size))

    def batches(self) -> Iterator[IntArray]:
        """Each batch's sample indices, in training order."""
        ends = np.append(self.starts[1:], self.order.size)
        for start, end in zip(self.starts.tolist(), ends.tolist(), strict=True):
            yield self.order[start:end]


Batcher: TypeAlias = Callable[[IntArray, int, int, np.random.Generator], Batching]
"""A bucketing strategy for :func:`sweep_buckets`: ``(lengths, bucket_size, batch_size, rng)``."""


def _rng(seed: int) -> np.random.Generator:
    """``numpy.random.default_rng(seed)``, with a bad seed named as such."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeValueError(
            f"seed must be a non-negative int, got a {type(seed).__name__}"
        )
    if seed < 0:
        raise InvalidInputError(f"seed must be a non-negative int, got {seed}")
    return np.random.default_rng(seed)


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise InvalidInputError(f"batch_size must be >= 1, got {batch_size}")


def _shuffle_batches(order: IntArray, starts: IntArray, rng: np.random.Generator) -> Batching:
    """Reorder whole batches by a random permutation (compositions unchanged)."""
    sizes = np.diff(np.append(starts, order.size))
    perm = rng.permutation(starts.size)
    new_sizes = sizes[perm]
    new_starts = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(new_sizes)[:-1]])
    gather = np.repeat(starts[perm] - new_starts, new_sizes) + np.arange(order.size)
    return Batching(order=order[gather], starts=new_starts)


def _group_starts(group_sizes: IntArray, batch_size: int) -> IntArray:
    """Batch starts when consecutive groups of these sizes are each cut into batches."""
    group_sizes = group_sizes[group_sizes > 0]
    # A batch size beyond the whole count cuts nothing: the same as the count itself.
    batch_size = min(batch_size, max(int(group_sizes.sum()), 1))
    per_group = -(-group_sizes // batch_size)
    group_begin = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(group_sizes)[:-1]])
    first_batch = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(per_group)[:-1]])
    total = int(per_group.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(first_batch, per_group)
    starts: IntArray = np.repeat(group_begin, per_group) + within * batch_size
    return starts


def _bucket_ids(values: IntArray, bucket_size: int) -> IntArray:
    # Lengths are at most MAX_LENGTH, so every wider bucket holds them all in bucket 0.
    return (values - 1) // min(bucket_size, MAX_LENGTH)


def _bucket_batching(
    values: IntArray, bucket_size: int, batch_size: int, rng: np.random.Generator
) -> Batching:
    perm = rng.permutation(values.size).astype(np.int64)
    ids = _bucket_ids(values, bucket_size)[perm]
    if int(ids.max(initial=0)) < 1 << 16:  # numpy's stable sort is a radix sort for 16 bits
        order = perm[np.argsort(ids.astype(np.uint16), kind="stable")]
    else:
        order = perm[np.argsort(ids, kind="stable")]
    # Sized by the buckets present, never by the largest bucket id: a length of 10**12
    # in buckets of 16 tokens would otherwise ask for a 500 GB count array.
    _, counts = np.unique(ids, return_counts=True)
    return _shuffle_batches(order, _group_starts(counts.astype(np.int64), batch_size), rng)


def random_batches(lengths: Lengths, *, batch_size: int, seed: int = 0) -> Batching:
    """The baseline: a random permutation cut into runs of ``batch_size``, batches shuffled."""
    _check_batch_size(batch_size)
    values = lengths_array(lengths)
    rng = _rng(seed)
    perm = rng.permutation(values.size).astype(np.int64)
    starts = np.arange(0, values.size, min(batch_size, int(values.size)), dtype=np.int64)
    return _shuffle_batches(perm, starts, rng)


def bucket_batches(
    lengths: Lengths, *, batch_size: int, bucket_size: int, seed: int = 0
) -> Batching:
    """Length-range buckets of ``bucket_size`` tokens, shuffled inside, batched within a bucket."""
    _check_batch_size(batch_size)
    if bucket_size < 1:
        raise InvalidInputError(f"bucket_size must be >= 1, got {bucket_size}")
    return _bucket_batching(lengths_array(lengths), bucket_size, batch_size, _rng(seed))


def _default_megabatch(n: int, batch_size: int) -> int:
    """HF's ``mega_batch_mult``: ``min(n // (batch_size * 4), 50)``, at least 1."""
    return max(min(n // (batch_size * 4), 50), 1)


def megabatch_batches(
    lengths: Lengths, *, batch_size: int, megabatch: int | None = None, seed: int = 0
) -> Batching:
    """HF-style grouping: megabatches of ``megabatch * batch_size``, each sorted longest first.

    ``megabatch`` defaults to HF's ``min(n // (batch_size * 4), 50)`` (at least 1).
    Batch order is the megabatches' order (a random permutation), as in HF.
    """
    _check_batch_size(batch_size)
    values = lengths_array(lengths)
    mult = _default_megabatch(values.size, batch_size) if megabatch is None else megabatch
    if mult < 1:
        raise InvalidInputError(f"megabatch must be >= 1, got {mult}")
    rng = _rng(seed)
    perm = rng.permutation(values.size).astype(np.int64)
    group = np.arange(values.size, dtype=np.int64) // min(mult * batch_size, int(values.size))
    order = perm[np.lexsort((-values[perm], group))]
    group_sizes = np.bincount(group).astype(np.int64)
    return Batching(order=order, starts=_group_starts(group_sizes, batch_size))


# ---------------------------------------------------------------------------------------
# The sweep


@enum.unique
class BucketStrategy(enum.Enum):
    """Which batching a :class:`BucketRow` describes."""

    RANDOM = "random"
    LENGTH_BUCKETS = "length_buckets"
    MEGABATCH = "megabatch"
    CUSTOM = "custom"
    """A caller's :data:`Batcher` passed to :func:`sweep_buckets`."""


@_json.shaped(
    _json.Shape(
        after={
            "pad_tokens": "slot_tokens",
            "gain_vs_random": "short_batches",
            "real_tokens_per_step": "gain_vs_random",
        },
        nan_as_none={"consecutive_length_corr"},
    )
)
@final
@attrs.frozen(kw_only=True)
class BucketRow:
    """One batching's figures in a :class:`BucketSweep`.

    ``gain_vs_random`` is the random baseline's token slots over this row's: how many
    times fewer padded tokens the model computes for the same real tokens (the
    speed-up if a step's cost follows its padded tokens). ``consecutive_length_corr``
    is the Pearson correlation of the mean length of batch ``i`` and batch ``i + 1``
    in training order: near 0 when batch order is shuffled, near 1 for length-sorted
    orders (a known cause of sawtooth loss curves); NaN when it is undefined (fewer
    than three batches, or every batch the same mean length). The source figures are
    None when no sources were given; ``source_entropy_bits`` is the mean over batches
    of the Shannon entropy of a batch's source mix.
    """

    strategy: BucketStrategy
    bucket_size: int | None
    n_batches: int = attrs.field(validator=non_negative)
    real_tokens: int = attrs.field(validator=non_negative)
    slot_tokens: int = attrs.field(validator=non_negative)
    waste_share: float = attrs.field(validator=share)
    gain_vs_random: float
    real_tokens_per_step: float
    full_batch_waste_share: float = attrs.field(validator=share)
    """Waste over full-size batches only (short batches at bucket ends excluded)."""
    short_batches: int = attrs.field(validator=non_negative)
    """Batches smaller than ``batch_size`` (at most one per bucket)."""
    consecutive_length_corr: float
    mean_sources_per_batch: float | None
    single_source_share: float | None = attrs.field(validator=optional(share))
    source_entropy_bits: float | None

    @property
    def pad_tokens(self) -> int:
        """Padded token slots."""
        return self.slot_tokens - self.real_tokens

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (NaN correlation as None)."""
        return _json.to_dict(self)


@final
@attrs.frozen(kw_only=True)
class BucketSweep:
    """A row per bucket size, with the random baseline and HF-style grouping beside them."""

    batch_size: int
    seed: int
    n_sequences: int
    n_sources: int
    """Distinct sources (0 when none were given)."""
    random: BucketRow
    megabatch: BucketRow
    rows: tuple[BucketRow, ...]
    """One per bucket size, in the order asked for."""

    def best(self) -> BucketRow:
        """The bucket size with the least padding waste (the smallest size on ties)."""
        return min(self.rows, key=lambda r: (r.waste_share, r.bucket_size or 0))

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return _json.to_dict(self)


def _source_codes(
    sources: Sequence[str] | npt.NDArray[np.generic] | None, lengths: Lengths, n: int
) -> tuple[npt.NDArray[np.int64] | None, int]:
    if sources is None:
        if isinstance(lengths, LengthInput) and lengths.source_codes is not None:
            codes = lengths.source_codes.astype(np.int64)
            return codes, len(lengths.source_names)
        return None, 0
    array = np.asarray(sources)
    if array.ndim != 1 or array.size != n:
        raise InvalidInputError(
            f"sources must be one per length: {n} lengths, {array.size} sources"
        )
    try:
        names, codes = np.unique(array, return_inverse=True)
    except TypeError:  # labels numpy cannot order (e.g. a mix of str and None)
        raise InvalidInputError("sources must be labels of one type (e.g. all strings)") from None
    return codes.astype(np.int64), int(names.size)


def _correlation(x: npt.NDArray[np.float64]) -> float:
    if x.size < 3:
        return math.nan
    a, b = x[:-1], x[1:]
    if float(a.std()) == 0.0 or float(b.std()) == 0.0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _source_figures(
    codes: npt.NDArray[np.int64], n_sources: int, batching: Batching
) -> tuple[float, float, float]:
    sizes = batching.sizes()
    n_batches = batching.n_batches
    batch_of = np.repeat(np.arange(n_batches, dtype=np.int64), sizes)
    key = batch_of * n_sources + codes[batching.order]
    if n_batches * n_sources <= 1 << 26:
        counts = np.bincount(key, minlength=n_batches * n_sources).reshape(n_batches, n_sources)
        distinct = (counts > 0).sum(axis=1)
        p = counts / sizes[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(counts > 0, -p * np.log2(np.where(counts > 0, p, 1.0)), 0.0)
        entropy = terms.sum(axis=1)
    else:  # many batches times many sources: count pairs by sorting instead
        pairs, pair_counts = np.unique(key, return_counts=True)
        pair_batch = pairs // n_sources
        distinct = np.bincount(pair_batch, minlength=n_batches)
        p = pair_counts / sizes[pair_batch]
        entropy = np.bincount(pair_batch, weights=-p * np.log2(p), minlength=n_batches)
    return (
        float(distinct.mean()),
        float((distinct == 1).mean()),
        float(np.maximum(entropy, 0.0).mean()),
    )


def _row(
    strategy: BucketStrategy,
    bucket_size: int | None,
    batching: Batching,
    *,
    values: IntArray,
    batch_size: int,
    codes: npt.NDArray[np.int64] | None,
    n_sources: int,
    random_slots: int | None,
) -> BucketRow:
    ordered = values[batching.order]
    starts = batching.starts
    sizes = batching.sizes()
    maxes = np.maximum.reduceat(ordered, starts)
    # Float sums for the mean lengths (a batch's int64 sum could wrap); exact ints below.
    means = np.add.reduceat(ordered.astype(np.float64), starts) / sizes
    slot_tokens = exact_dot(sizes, maxes)
    real = exact_dot(values)
    full = sizes == min(batch_size, int(values.size) + 1)  # no batch is full past the count
    full_slots = exact_dot(sizes[full], maxes[full])
    full_real = exact_dot(ordered[np.repeat(full, sizes)])
    sources: tuple[float, float, float] | tuple[None, None, None] = (
        (None, None, None) if codes is None else _source_figures(codes, n_sources, batching)
    )
    return BucketRow(
        strategy=strategy,
        bucket_size=bucket_size,
        n_batches=batching.n_batches,
        real_tokens=real,
        slot_tokens=slot_tokens,
        waste_share=(slot_tokens - real) / slot_tokens,
        gain_vs_random=(random_slots if random_slots is not None else slot_tokens) / slot_tokens,
        real_tokens_per_step=real / batching.n_batches,
        full_batch_waste_share=(full_slots - full_real) / full_slots if full_slots else 0.0,
        short_batches=int((~full).sum()),
        consecutive_length_corr=_correlation(means),
        mean_sources_per_batch=sources[0],
        single_source_share=sources[1],
        source_entropy_bits=sources[2],
    )


def _composition_digest(batching: Batching) -> bytes:
    """A fingerprint of the batches as sets of samples (batch order and order inside ignored).

    Each sample is mapped to the smallest sample index of its batch; two batchings
    have the same composition exactly when these maps are equal.
    """
    mins = np.minimum.reduceat(batching.order, batching.starts)
    representative = np.empty(batching.order.size, dtype=np.int64)
    representative[batching.order] = np.repeat(mins, batching.sizes())
    return hashlib.blake2b(representative.tobytes(), digest_size=16).digest()


def _partition_digest(distinct_lengths: IntArray, bucket_size: int) -> bytes:
    """A fingerprint of the partition of the lengths present into buckets of this width."""
    ids = _bucket_ids(distinct_lengths, bucket_size)
    boundaries = np.flatnonzero(np.diff(ids) != 0)
    return hashlib.blake2b(boundaries.tobytes(), digest_size=16).digest()


_GUARD_RETRIES = 8


def _same_under_other_seeds(
    run: Batcher, values: IntArray, sizes: tuple[int, int], *, batch_size: int, seed: int
) -> bool:
    """Whether sizes ``a`` and ``b`` still give identical batches under other seeds.

    On small inputs a genuine strategy can give identical batches for two sizes by
    chance; a strategy that ignores the bucket size gives them under every seed.
    """
    a, b = sizes
    for k in range(1, _GUARD_RETRIES + 1):
        first = _composition_digest(run(values, a, batch_size, np.random.default_rng(seed + k)))
        second = _composition_digest(run(values, b, batch_size, np.random.default_rng(seed + k)))
        if first != second:
            return False
    return True


def _bucket_sizes(bucket_sizes: Sequence[int]) -> list[int]:
    """The bucket sizes to sweep: ints, at least one, each >= 1, no repeats."""
    try:
        sizes = [operator.index(s) for s in bucket_sizes]
    except TypeError:
        raise InvalidInputError("bucket sizes must be ints") from None
    if not sizes:
        raise InvalidInputError("bucket_sizes is empty: give at least one bucket size")
    if any(s < 1 for s in sizes):
        raise InvalidInputError(f"bucket sizes must be >= 1, got {sizes}")
    if len(set(sizes)) != len(sizes):
        raise InvalidInputError(f"bucket sizes repeat: {sizes}")
    return sizes


def sweep_buckets(
    lengths: Lengths,
    *,
    batch_size: int,
    bucket_sizes: Sequence[int],
    sources: Sequence[str] | npt.NDArray[np.generic] | None = None,
    seed: int = 0,
    batcher: Batcher | None = None,
) -> BucketSweep:
    """Score bucketed batching at each bucket size against random batches and HF grouping.

    Args:
        lengths: sequence lengths (ints, an int array, or a :class:`LengthInput`,
            whose sources are used when ``sources`` is None).
        batch_size: sequences per batch.
        bucket_sizes: bucket widths in tokens, each >= 1, no repeats.
        sources: one label per sequence (e.g. the dataset it came from), for the
            source-diversity figures.
        seed: seeds every strategy alike, so the rows are paired.
        batcher: a custom strategy ``(lengths, bucket_size, batch_size, rng) ->
            Batching`` to sweep instead of :func:`bucket_batches`; it gets the guard
            too (rows are then :attr:`BucketStrategy.CUSTOM`).

    The guard: when two sizes that partition the lengths present into different
    buckets give identical batch compositions, both are re-drawn under
    ``_GUARD_RETRIES`` (8) other seeds; identical every time means the strategy
    ignores the bucket size. (A chance coincidence on a tiny input would have to
    repeat nine times.) With ``batch_size == 1`` every batching is singletons, so
    the guard does not apply.

    Raises:
        SweepNoOpError: two bucket sizes that partition the lengths into different
            buckets gave identical batch compositions: the strategy ignores the
            bucket size (typically it re-sorts inside buckets, which collapses every
            size to one global sort).
        InvalidInputError / LengthInputError: bad arguments or lengths.
    """
    _check_batch_size(batch_size)
    sizes = _bucket_sizes(bucket_sizes)
    values = lengths_array(lengths)
    codes, n_sources = _source_codes(sources, lengths, values.size)

    def row(strategy: BucketStrategy, size: int | None, b: Batching, base: int | None) -> BucketRow:
        return _row(
            strategy,
            size,
            b,
            values=values,
            batch_size=batch_size,
            codes=codes,
            n_sources=n_sources,
            random_slots=base,
        )

    random = row(
        BucketStrategy.RANDOM, None, random_batches(values, batch_size=batch_size, seed=seed), None
    )
    mega = row(
        BucketStrategy.MEGABATCH,
        None,
        megabatch_batches(values, batch_size=batch_size, seed=seed),
        random.slot_tokens,
    )
    strategy = BucketStrategy.LENGTH_BUCKETS if batcher is None else BucketStrategy.CUSTOM
    run: Batcher = _bucket_batching if batcher is None else batcher
    distinct = np.unique(values)
    seen: dict[bytes, tuple[int, bytes]] = {}
    rows: list[BucketRow] = []
    for size in sizes:
        batching = run(values, size, batch_size, np.random.default_rng(seed))
        if batching.order.size != values.size:
            raise InvalidInputError(
                f"the batcher placed {batching.order.size} samples for {values.size} lengths"
            )
        composition = _composition_digest(batching)
        partition = _partition_digest(distinct, size)
        if (
            composition in seen
            and seen[composition][1] != partition
            and batch_size > 1
            and _same_under_other_seeds(
                run, values, (seen[composition][0], size), batch_size=batch_size, seed=seed
            )
        ):
            other = seen[composition][0]
            raise SweepNoOpError(
                f"bucket sizes {other} and {size} split the lengths into different buckets "
                "but gave identical batches: the strategy ignores the bucket size. The "
                "likely cause is re-sorting inside each bucket (or sorting globally), "
                "which collapses every bucket size to one global sort; shuffle inside "
                "buckets instead and draw each batch from one bucket"
            )
        seen.setdefault(composition, (size, partition))
        rows.append(row(strategy, size, batching, random.slot_tokens))
    return BucketSweep(
        batch_size=batch_size,
        seed=seed,
        n_sequences=int(values.size),
        n_sources=n_sources,
        random=random,
        megabatch=mega,
        rows=tuple(rows),
    )
