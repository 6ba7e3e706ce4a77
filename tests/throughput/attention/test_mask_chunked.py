"""Chunked attention (Llama 4's ``attention_chunk_size`` layers) read as its own band.

The masks are built by the definition transformers' ``chunked_overlay`` states: key
``k`` is in query ``q``'s chunk when ``(k - s) // c == (q - s) // c``, where ``s`` is
where the grid starts: the row's first real token (after left padding), or, with
packed documents, each document's first token (transformers remaps the chunk function
to positions, which restart at every document). The reader is told the chunk size and
the scenario's documents, and must read the documents as documents and the chunks as
chunks; whatever it claims is rebuilt and compared with the mask.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_mask_band import reconstruct
from test_mask_intervals import dense_of

# Private: the band reader is held to chunked masks built by definition, not only a model's.
from probewise.throughput.attention._band import BandKind, RowIntervals, analyse_band

BoolArray = npt.NDArray[np.bool_]


def chunked(
    length: int,
    chunk: int,
    *,
    documents: tuple[int, ...] = (),
    window: int | None = None,
    left: tuple[int, ...] = (0,),
) -> BoolArray:
    """``allowed[b, q, k]`` by the definition, one cell at a time (``left``: each row's
    left padding)."""
    parts = documents or (length,)
    doc = np.repeat(np.arange(len(parts)), parts)
    start = np.repeat(np.cumsum((0, *parts))[:-1], parts)
    out = np.zeros((len(left), length, length), dtype=bool)
    for b, pad in enumerate(left):
        for q in range(length):
            for k in range(length):
                grid = start[q] if documents else pad
                ok = pad <= k <= q and doc[k] == doc[q]
                ok = ok and (k - grid) // chunk == (q - grid) // chunk
                if window is not None:
                    ok = ok and k > q - window
                out[b, q, k] = ok
    return out


def test_chunks_are_not_counted_as_documents() -> None:
    # The issue's cases: a row of 32 in chunks of 8 is one chunked row, not "4
    # documents"; 3 packed documents are 3 documents, not "5".
    plain = analyse_band(chunked(32, 8), chunk_size=8)
    assert plain.kind is BandKind.CHUNKED
    assert plain.chunk_size == 8
    assert plain.segments == ()
    assert plain.describe() == "chunked, chunks of 8"
    packed = analyse_band(
        chunked(32, 8, documents=(8, 10, 14)), chunk_size=8, documents=(8, 10, 14)
    )
    assert packed.segments == ((8, 10, 14),)
    assert packed.describe() == "chunked, chunks of 8 inside 3 documents per row"
    # Without the chunk size the reader can only see blocks (what it said before).
    assert analyse_band(chunked(32, 8)).kind is BandKind.BLOCK_DIAGONAL
    # Packed documents whose mask does not keep them apart (a cache was built): the
    # chunks run over the whole row, and the band says so.
    leaking = analyse_band(chunked(32, 8), chunk_size=8, documents=(8, 10, 14))
    assert leaking.describe() == "chunked, chunks of 8"
    # Documents no longer than a chunk are never split: plain block-diagonal.
    short = analyse_band(
        chunked(32, 16, documents=(8, 10, 14)), chunk_size=16, documents=(8, 10, 14)
    )
    assert short.describe() == "block-diagonal, 3 documents per row"


def test_left_padding_shifts_the_grid() -> None:
    allowed = chunked(20, 4, left=(0, 3))
    band = analyse_band(allowed, chunk_size=4)
    assert band.kind is BandKind.CHUNKED
    assert band.describe() == "chunked, chunks of 4, 3 padding columns, 3 fully masked rows"
    assert np.array_equal(reconstruct(band, allowed), allowed)


@st.composite
def chunked_cases(
    draw: st.DrawFn,
) -> tuple[BoolArray, int, tuple[int, ...], tuple[int, ...], int | None]:
    length = draw(st.integers(2, 28))
    chunk = draw(st.integers(1, length + 2))
    window = draw(st.none() | st.integers(1, length))
    documents: tuple[int, ...] = ()
    left: tuple[int, ...] = (0,)
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, length - 1), min_size=1, max_size=4)))
        documents = tuple(int(d) for d in np.diff([0, *cuts, length]))
    else:
        left = tuple(draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=2)))
    allowed = chunked(length, chunk, documents=documents, window=window, left=left)
    return allowed, chunk, documents, left, window


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunked_cases())
def test_chunked_masks_are_read_exactly(
    case: tuple[BoolArray, int, tuple[int, ...], tuple[int, ...], int | None],
) -> None:
    allowed, chunk, documents, left, window = case
    band = analyse_band(allowed, chunk_size=chunk, documents=documents)
    assert band.kind is not BandKind.OTHER
    rebuilt = reconstruct(band, allowed)
    assert rebuilt is not None
    assert np.array_equal(rebuilt, allowed)
    length = allowed.shape[1]
    bites = max(documents or (length - max(left),)) > chunk and (window is None or window > 1)
    if band.kind is BandKind.CHUNKED:
        assert band.chunk_size == chunk
        if band.segments:  # documents counted as the scenario's documents, never chunks
            assert band.segments == (documents,) * allowed.shape[0]
    elif bites and (window is None or window > chunk):
        # The chunks cut the rows and no narrower window hides them: it must say chunked.
        assert band.kind is BandKind.CHUNKED


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 2).flatmap(
        lambda batch: st.integers(1, 10).flatmap(
            lambda n: st.tuples(
                st.lists(st.booleans(), min_size=batch * n * n, max_size=batch * n * n).map(
                    lambda bits: np.array(bits, dtype=bool).reshape(batch, n, n)
                ),
                st.integers(1, n + 1),
            )
        )
    )
)
def test_a_chunk_hint_never_makes_a_wrong_claim(case: tuple[BoolArray, int]) -> None:
    allowed, chunk = case
    band = analyse_band(allowed, chunk_size=chunk)
    rebuilt = reconstruct(band, allowed)
    if rebuilt is not None:
        assert np.array_equal(rebuilt, allowed)


def test_intervals_and_dense_read_the_same_chunked_band() -> None:
    allowed = chunked(24, 5, documents=(7, 17), window=3)
    lo = np.where(allowed.any(-1), allowed.argmax(-1), 0)
    hi = np.where(allowed.any(-1), 23 - allowed[..., ::-1].argmax(-1), -1)
    intervals = RowIntervals(lo=lo, hi=hi, keep=np.ones((1, 24), dtype=bool))
    assert np.array_equal(dense_of(intervals), allowed)
    dense = analyse_band(allowed, chunk_size=5, documents=(7, 17))
    assert analyse_band(intervals, chunk_size=5, documents=(7, 17)) == dense
    assert (
        dense.describe()
        == "chunked, chunks of 5 inside 2 documents per row, sliding window 3 inside"
    )


masking_utils = pytest.importorskip("transformers.masking_utils")
torch = pytest.importorskip("torch")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_transformers_chunked_masks_read_as_intervals(data: st.DataObject) -> None:
    """transformers' own chunked function (left padding, or packed and remapped) built
    dense by its ``sdpa_mask`` equals the intervals the probe reads; the band says chunked."""
    # Private: the stand-in sdpa_mask runs beside transformers' own to compare what each holds.
    from probewise.throughput.attention import _stand_ins

    batch = data.draw(st.integers(1, 2))
    length = data.draw(st.integers(2, 40))
    chunk = data.draw(st.integers(1, length))
    attention = None
    documents: tuple[int, ...] = ()
    real = length  # the longest run of real tokens the chunks could cut
    if data.draw(st.booleans()):
        cuts = sorted(data.draw(st.sets(st.integers(1, length - 1), max_size=4)))
        documents = tuple(int(d) for d in np.diff([0, *cuts, length]))
        positions = torch.tensor(np.concatenate([np.arange(d) for d in documents]))[None, :]
        positions = positions.expand(batch, -1)
        function = masking_utils.chunked_causal_mask_function(
            chunk, torch.zeros(batch, dtype=torch.long)
        )
        packed = masking_utils.find_packed_sequence_indices(positions)
        if packed is not None:
            function = masking_utils.and_masks(
                masking_utils.remap_positions_for_packed_sequence(function, positions),
                masking_utils.packed_sequence_mask_function(packed),
            )
    else:
        left = data.draw(st.lists(st.integers(0, length - 1), min_size=batch, max_size=batch))
        keep = torch.ones((batch, length), dtype=torch.bool)
        for b, n in enumerate(left):
            keep[b, :n] = False
        attention = keep
        real = length - min(left)
        function = masking_utils.chunked_causal_mask_function(chunk, torch.tensor(left))
    arguments: dict[str, object] = {
        "batch_size": batch,
        "q_length": length,
        "kv_length": length,
        "mask_function": function,
        "attention_mask": attention,
        "local_size": chunk,
        "allow_is_causal_skip": False,
    }
    dense = masking_utils.sdpa_mask(**arguments)
    stand_ins: dict[int, _stand_ins.StandIn] = {}
    build = _stand_ins.structured_sdpa_mask(masking_utils.sdpa_mask, stand_ins)
    build(**arguments)
    (read,) = stand_ins.values()
    assert np.array_equal(dense_of(read.intervals), dense[:, 0].numpy())
    assert read.nbytes == dense.untyped_storage().nbytes()
    band = analyse_band(read.intervals, chunk_size=chunk, documents=documents)
    assert band == analyse_band(dense[:, 0].numpy(), chunk_size=chunk, documents=documents)
    if max(documents or (real,)) > chunk:
        assert band.kind is BandKind.CHUNKED
