"""The band reader against masks built by brute force, and its soundness on any mask."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise import InvalidInputError

# Private: the band reader is held to brute-force masks; probe_masks shows only each layer's band.
from probewise.throughput.attention._band import Band, BandKind, analyse_band, crosses_documents

BoolArray = npt.NDArray[np.bool_]


def build(
    length: int,
    *,
    window: int | None,
    documents: list[int] | None,
    keep: BoolArray,
) -> BoolArray:
    """``allowed[b, q, k]`` by the definition, one loop per cell."""
    batch = keep.shape[0]
    doc = np.zeros(length, dtype=np.int64)
    if documents:
        doc = np.repeat(np.arange(len(documents)), documents)
    out = np.zeros((batch, length, length), dtype=bool)
    for b in range(batch):
        for q in range(length):
            for k in range(length):
                ok = k <= q and keep[b, k] and doc[k] == doc[q]
                if window is not None:
                    ok = ok and k > q - window
                out[b, q, k] = ok
    return out


@st.composite
def structured(draw: st.DrawFn) -> tuple[BoolArray, int | None, list[int] | None, BoolArray]:
    length = draw(st.integers(2, 24))
    batch = draw(st.integers(1, 2))
    window = draw(st.none() | st.integers(1, length - 1))
    documents: list[int] | None = None
    if draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, length - 1), min_size=1, max_size=4)))
        documents = list(np.diff([0, *cuts, length]).astype(int))
    pad = draw(st.sampled_from(["none", "right", "left"]))
    keep = np.ones((batch, length), dtype=bool)
    if pad != "none" and documents is None:
        for b in range(batch):
            n = draw(st.integers(0, length - 1))
            if pad == "right":
                keep[b, length - n :] = False
            else:
                keep[b, :n] = False
    return build(length, window=window, documents=documents, keep=keep), window, documents, keep


@settings(max_examples=300, deadline=None)
@given(structured())
def test_structures_are_recognised_or_reconstructed(
    case: tuple[BoolArray, int | None, list[int] | None, BoolArray],
) -> None:
    allowed, window, documents, _keep = case
    band = analyse_band(allowed)
    assert band.kind is not BandKind.OTHER
    assert reconstruct(band, allowed) is not None
    assert np.array_equal(reconstruct(band, allowed), allowed)
    if documents is None and window is None and not np.all(_keep):
        assert band.kind is BandKind.CAUSAL
    if documents and band.kind is BandKind.BLOCK_DIAGONAL and np.all(_keep):
        assert all(list(row) == documents for row in band.segments)
    if documents:
        assert crosses_documents(allowed, tuple(documents)) is False
        joined = allowed.copy()
        joined[:, -1, 0] = True  # the last query now sees the first document's first key
        assert crosses_documents(joined, tuple(documents)) is True


def reconstruct(band: Band, allowed: BoolArray) -> BoolArray | None:
    """The mask the band describes, given the mask's own padding columns."""
    batch, length, _ = allowed.shape
    keep = allowed.any(axis=1)
    q = np.arange(length)[:, None]
    k = np.arange(length)[None, :]
    match band.kind:
        case BandKind.FULL:
            base = np.ones((length, length), dtype=bool)
            return np.broadcast_to(base, allowed.shape) & keep[:, None, :]
        case BandKind.CAUSAL:
            base = k <= q
            return np.broadcast_to(base, allowed.shape) & keep[:, None, :]
        case BandKind.SLIDING_WINDOW:
            assert band.window is not None
            base = (k <= q) & (k > q - band.window)
            return np.broadcast_to(base, allowed.shape) & keep[:, None, :]
        case BandKind.BLOCK_DIAGONAL:
            out = np.zeros(allowed.shape, dtype=bool)
            for b in range(batch):
                doc = np.repeat(np.arange(len(band.segments[b])), band.segments[b])
                base = (k <= q) & (doc[:, None] == doc[None, :])
                if band.window is not None:
                    base &= k > q - band.window
                out[b] = base & keep[b][None, :]
            return out
        case BandKind.CHUNKED:
            assert band.chunk_size is not None
            out = np.zeros(allowed.shape, dtype=bool)
            for b in range(batch):
                segments = band.segments[b] if band.segments else (length,)
                start = np.repeat(np.cumsum((0, *segments))[:-1], segments)[:, None]
                if not band.segments:  # the grid starts at the row's first kept key
                    start = np.full_like(start, int(np.argmax(keep[b])) if keep[b].any() else 0)
                chunk = band.chunk_size
                same = (q - start) // chunk == (k - start.T) // chunk
                base = (
                    (k <= q)
                    & same
                    & (
                        np.repeat(np.arange(len(segments)), segments)[:, None]
                        == np.repeat(np.arange(len(segments)), segments)[None, :]
                    )
                )
                if band.window is not None:
                    base &= k > q - band.window
                out[b] = base & keep[b][None, :]
            return out
        case BandKind.NONE | BandKind.OTHER:
            return None


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 2).flatmap(
        lambda batch: st.integers(1, 12).flatmap(
            lambda n: st.lists(st.booleans(), min_size=batch * n * n, max_size=batch * n * n).map(
                lambda bits: np.array(bits, dtype=bool).reshape(batch, n, n)
            )
        )
    )
)
def test_any_mask_is_read_soundly(allowed: BoolArray) -> None:
    band = analyse_band(allowed)
    assert 0.0 <= band.allowed_share <= 1.0
    assert band.allowed_share == pytest.approx(allowed.mean())
    assert band.padding_columns == tuple(int(x) for x in (~allowed.any(axis=1)).sum(axis=1))
    assert band.masked_rows == tuple(int(x) for x in (~allowed.any(axis=2)).sum(axis=1))
    rebuilt = reconstruct(band, allowed)
    if rebuilt is not None:  # whatever the reader claims, the claim must be exact
        assert np.array_equal(rebuilt, allowed)


def test_descriptions() -> None:
    length = 16
    q = np.arange(length)[:, None]
    k = np.arange(length)[None, :]
    causal = np.broadcast_to(k <= q, (1, length, length)).copy()
    assert analyse_band(causal).describe() == "causal"
    sliding = causal & (k > q - 4)
    assert analyse_band(sliding).describe() == "sliding window 4"
    padded = causal.copy()
    padded[:, :, 12:] = False
    assert analyse_band(padded).describe() == "causal, 4 padding columns"
    doc = np.repeat(np.arange(2), 8)
    block = causal & (doc[:, None] == doc[None, :])
    band = analyse_band(block)
    assert band.segments == ((8, 8),)
    assert band.describe() == "block-diagonal, 2 documents per row"
    assert crosses_documents(causal, (8, 8))
    assert not crosses_documents(block, (8, 8))
    assert analyse_band(np.zeros((1, 4, 6), dtype=bool)).kind is BandKind.OTHER
    nothing = analyse_band(np.zeros((1, 4, 4), dtype=bool))
    assert nothing.kind is BandKind.OTHER
    assert nothing.allowed_share == 0.0


def test_band_validation() -> None:
    with pytest.raises(InvalidInputError):
        Band(kind=BandKind.SLIDING_WINDOW)
    with pytest.raises(InvalidInputError):
        Band(kind=BandKind.CAUSAL, window=4)
    with pytest.raises(InvalidInputError):
        Band(kind=BandKind.CAUSAL, segments=((4,),))
    with pytest.raises(InvalidInputError):
        Band(kind=BandKind.OTHER, allowed_share=1.5)
    with pytest.raises(InvalidInputError):
        analyse_band(np.ones((4, 4), dtype=bool))
    with pytest.raises(InvalidInputError, match="chunk size"):
        Band(kind=BandKind.CHUNKED)
    with pytest.raises(InvalidInputError, match="chunk size"):
        Band(kind=BandKind.CAUSAL, chunk_size=8)
    with pytest.raises(InvalidInputError):
        Band(kind=BandKind.CHUNKED, chunk_size=0)
    assert Band(kind=BandKind.CHUNKED, chunk_size=8, segments=((8, 8),), window=3).describe() == (
        "chunked, chunks of 8 inside 2 documents per row, sliding window 3 inside"
    )
