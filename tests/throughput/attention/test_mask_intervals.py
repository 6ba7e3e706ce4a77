"""The structured mask reading (row intervals from transformers' mask functions)
against the dense one, which stays the ground truth.

Three levels, at lengths where dense is cheap (up to 200 tokens):

- the band reader: any row-interval mask reads to the same band, and the same
  cross-document answer, as its dense form;
- the mask-function reader: transformers' own ``sdpa_mask`` on causal, sliding-window
  and packed-document functions, with padding or not, builds a dense tensor equal to
  the intervals the probe reads, of the bytes the probe reports;
- the probe: the whole report with structured masks equals the report read from the
  dense masks, on tiny configs of every mask-building family (Llama 4's chunked layers
  included) over random scenarios, under SDPA, eager and flex_attention.

Then one long-context check: 131,072 tokens on two layers returns at once with the
bytes transformers would allocate, which only the structured path can do.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Private: the band reader and _probe(dense_masks=True) give the dense ground truth to compare.
from probewise.throughput.attention._band import RowIntervals, analyse_band, crosses_documents
from probewise.throughput.attention.masks import MaskScenario, Packing, Padding, _probe

torch = pytest.importorskip("torch")
masking_utils = pytest.importorskip("transformers.masking_utils")

# Private: the recorder's dense read is patched to fail; stand-in masks are built beside real ones.
from probewise.throughput.attention import _recorder as _mask_recorder  # noqa: E402  (needs torch)
from probewise.throughput.attention import _stand_ins  # noqa: E402  (needs torch)

BoolArray = npt.NDArray[np.bool_]


def dense_of(mask: RowIntervals) -> BoolArray:
    """The dense mask of row intervals (batch x queries x keys: small masks only)."""
    keys = np.arange(mask.keep.shape[1], dtype=np.int64)[None, None, :]
    inside = (mask.lo[:, :, None] <= keys) & (keys <= mask.hi[:, :, None])
    return np.asarray(inside & mask.keep[:, None, :])


def _documents(draw: st.DrawFn, length: int) -> tuple[int, ...]:
    cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=5)))
    return tuple(int(d) for d in np.diff([0, *cuts, length]))


@st.composite
def interval_masks(draw: st.DrawFn) -> tuple[RowIntervals, tuple[int, ...]]:
    """Any row-interval mask (not only structured ones), and documents for its rows."""
    batch = draw(st.integers(1, 3))
    length = draw(st.integers(2, 20))
    keys = draw(st.sampled_from([length, length + draw(st.integers(-1, 3))]))
    keys = max(1, keys)
    ints = st.integers(-3, keys + 3)
    lo = np.array(draw(st.lists(ints, min_size=batch * length, max_size=batch * length)))
    hi = np.array(draw(st.lists(ints, min_size=batch * length, max_size=batch * length)))
    keep = np.array(draw(st.lists(st.booleans(), min_size=batch * keys, max_size=batch * keys)))
    if draw(st.booleans()):
        keep[:] = True
    mask = RowIntervals(
        lo=np.clip(lo, 0, keys).reshape(batch, length).astype(np.int64),
        hi=np.clip(hi, -1, keys - 1).reshape(batch, length).astype(np.int64),
        keep=keep.reshape(batch, keys).astype(bool),
    )
    return mask, _documents(draw, length)


@settings(max_examples=400, deadline=None)
@given(interval_masks())
def test_band_of_row_intervals_equals_band_of_their_dense_mask(
    case: tuple[RowIntervals, tuple[int, ...]],
) -> None:
    mask, documents = case
    dense = dense_of(mask)
    assert analyse_band(mask) == analyse_band(dense)
    if mask.shape[1] == mask.shape[2]:
        assert crosses_documents(mask, documents) == crosses_documents(dense, documents)


def _causal_rows(length: int, window: int | None, documents: tuple[int, ...]) -> RowIntervals:
    q = np.arange(length, dtype=np.int64)
    starts = np.repeat(np.cumsum((0, *documents))[:-1], documents)
    lo = starts if window is None else np.maximum(starts, q - window + 1)
    return RowIntervals(lo=lo[None, :], hi=q[None, :], keep=np.ones((1, length), dtype=bool))


def test_structured_reads_of_the_usual_masks() -> None:
    """The four shapes a decoder sees, read from intervals, described as from dense."""
    cases = [
        (_causal_rows(16, None, (16,)), "causal"),
        (_causal_rows(16, 4, (16,)), "sliding window 4"),
        (_causal_rows(16, None, (8, 8)), "block-diagonal, 2 documents per row"),
        (
            _causal_rows(16, 3, (8, 8)),
            "block-diagonal, 2 documents per row, sliding window 3 inside",
        ),
    ]
    for mask, text in cases:
        assert analyse_band(mask).describe() == text
        assert analyse_band(dense_of(mask)).describe() == text
    assert crosses_documents(_causal_rows(16, None, (16,)), (8, 8))
    assert not crosses_documents(_causal_rows(16, None, (8, 8)), (8, 8))


@st.composite
def sdpa_mask_cases(draw: st.DrawFn) -> dict[str, object]:
    """The arguments transformers' ``create_causal_mask`` / sliding variant pass to
    ``sdpa_mask``, for random lengths, windows, padding and packed documents."""
    batch = draw(st.integers(1, 3))
    length = draw(st.integers(2, 48))
    window = draw(st.none() | st.integers(1, length + 2))
    if draw(st.booleans()):  # what create_causal_mask / the sliding variant compose
        function = (
            masking_utils.causal_mask_function
            if window is None
            else masking_utils.sliding_window_causal_mask_function(window)
        )
    else:  # and what the bidirectional variants (encoders, Gemma 4's vision) compose
        function = (
            masking_utils.bidirectional_mask_function
            if window is None
            else masking_utils.sliding_window_bidirectional_mask_function(window)
        )
    attention: torch.Tensor | None = None
    how = draw(st.sampled_from(["none", "left", "right", "holes", "packed"]))
    if how == "packed":
        documents = [_documents(draw, length) for _ in range(batch)]
        positions = torch.tensor(
            np.stack([np.concatenate([np.arange(d) for d in row]) for row in documents])
        )
        packed = masking_utils.find_packed_sequence_indices(positions)
        if packed is not None:
            function = masking_utils.and_masks(
                masking_utils.remap_positions_for_packed_sequence(function, positions),
                masking_utils.packed_sequence_mask_function(packed),
            )
    elif how != "none":
        keep = np.ones((batch, length), dtype=np.int64)
        for b in range(batch):
            n = draw(st.integers(0, length - 1))
            if how == "left":
                keep[b, :n] = 0
            elif how == "right":
                keep[b, length - n :] = 0
            else:
                keep[b] = draw(st.lists(st.integers(0, 1), min_size=length, max_size=length))
        attention = torch.tensor(keep).to(torch.bool)
    return {
        "batch_size": batch,
        "q_length": length,
        "kv_length": length,
        "mask_function": function,
        "attention_mask": attention,
        "local_size": window,
        "allow_is_causal_skip": draw(st.booleans()),
        "allow_is_bidirectional_skip": draw(st.booleans()),
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sdpa_mask_cases())
def test_sdpa_mask_read_as_intervals_equals_the_mask_transformers_builds(
    arguments: dict[str, object],
) -> None:
    dense = masking_utils.sdpa_mask(**arguments)
    stand_ins: dict[int, _stand_ins.StandIn] = {}
    build = _stand_ins.structured_sdpa_mask(masking_utils.sdpa_mask, stand_ins)
    stand_in = build(**arguments)
    if dense is None:
        assert stand_in is None
        return
    assert isinstance(stand_in, torch.Tensor)
    assert stand_in.shape == dense.shape
    assert stand_in.dtype == dense.dtype
    (read,) = stand_ins.values()
    assert read.tensor is stand_in
    assert read.nbytes == dense.untyped_storage().nbytes()
    assert np.array_equal(dense_of(read.intervals), dense[:, 0].numpy())


def test_functions_the_reader_does_not_model_are_built_dense() -> None:
    """``or_masks`` (e.g. image tokens): transformers' dense mask, no stand-in."""
    stand_ins: dict[int, _stand_ins.StandIn] = {}
    build = _stand_ins.structured_sdpa_mask(masking_utils.sdpa_mask, stand_ins)
    function = masking_utils.or_masks(
        masking_utils.causal_mask_function, masking_utils.sliding_window_overlay(2)
    )
    arguments = {
        "batch_size": 1,
        "q_length": 8,
        "kv_length": 8,
        "mask_function": function,
        "allow_is_causal_skip": False,
    }
    built = build(**arguments)
    assert not stand_ins
    assert isinstance(built, torch.Tensor)
    assert torch.equal(built, masking_utils.sdpa_mask(**arguments))


def _tiny(family: str, window: int) -> dict[str, object]:
    base: dict[str, object] = {
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "intermediate_size": 16,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "vocab_size": 64,
        "pad_token_id": 0,
    }
    match family:
        case "llama":
            base.update(model_type="llama")
        case "mistral":
            base.update(model_type="mistral", sliding_window=window)
        case "qwen2":
            base.update(
                model_type="qwen2",
                sliding_window=window,
                use_sliding_window=True,
                max_window_layers=1,
            )
        case "llama4":
            base.update(
                model_type="llama4_text",
                attention_chunk_size=window,
                intermediate_size_mlp=16,
                num_local_experts=2,
                layer_types=["chunked_attention", "full_attention"],
            )
        case _:
            base.update(
                model_type="gemma3_text",
                sliding_window=window,
                layer_types=["sliding_attention", "full_attention"],
            )
    return base


@st.composite
def probe_cases(draw: st.DrawFn) -> tuple[dict[str, object], MaskScenario]:
    family = draw(st.sampled_from(["llama", "mistral", "qwen2", "gemma3", "llama4"]))
    length = draw(st.integers(2, 200))
    batch = draw(st.integers(1, 3))
    window = draw(st.integers(1, length + 4))
    padding = draw(st.sampled_from(list(Padding)))
    packing = Packing.NONE if padding is not Padding.NONE else draw(st.sampled_from(list(Packing)))
    fields: dict[str, object] = {}
    if padding is not Padding.NONE:
        fields["lengths"] = tuple(draw(st.integers(1, length)) for _ in range(batch))
    if packing is not Packing.NONE:
        fields["documents"] = _documents(draw, length)
    scenario = MaskScenario(
        seq_len=length,
        batch=batch,
        padding=padding,
        packing=packing,
        use_cache=draw(st.sampled_from([None, False, True])),
        training=draw(st.booleans()),
        attn_implementation=draw(st.sampled_from([None, "eager", "flex_attention"])),
        **fields,  # type: ignore[arg-type]
    )
    return _tiny(family, window), scenario


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(probe_cases())
def test_probe_report_with_structured_masks_equals_the_dense_one(
    case: tuple[dict[str, object], MaskScenario],
) -> None:
    config, scenario = case

    def no_dense_read(mask: object) -> object:
        raise AssertionError("the structured run read a dense mask")

    with pytest.MonkeyPatch.context() as patch:  # every mask these families build is modelled
        patch.setattr(_mask_recorder, "_allowed", no_dense_read)
        structured = _probe(config, scenario, dtype="bf16")
    dense = _probe(config, scenario, dtype="bf16", dense_masks=True)
    assert structured == dense


def test_bundled_length_l_at_128k_is_reported_without_being_built() -> None:
    """Two Gemma 3 layers (one sliding, one global) at 131,072 x 2 with right padding:
    transformers would build two 32 GiB masks; the probe reads them in O(length)."""
    config = _tiny("gemma3", 1024)
    scenario = MaskScenario(seq_len=131_072, batch=2, padding=Padding.RIGHT)
    report = _probe(config, scenario, dtype="bf16")
    per_mask = 2 * 131_072 * 131_072
    assert [layer.mask_bytes for layer in report.layers] == [per_mask, per_mask]
    assert report.mask_bytes == 2 * per_mask
    sliding, full = report.layers
    assert sliding.band.window == 1024
    assert full.band.padding_columns == (
        131_072 - scenario.lengths[0],
        131_072 - scenario.lengths[1],
    )
    assert "32,768.0 MiB" in full.lost_reasons()[0]


def test_a_mask_changed_before_sdpa_is_read_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that copies its mask before SDPA hands SDPA a tensor the probe did not
    hand out: the probe runs the forward again with dense masks and reads those."""
    from transformers.models.llama import modeling_llama

    original = modeling_llama.LlamaAttention.forward

    def copying(self: torch.nn.Module, *args: object, **kwargs: object) -> object:
        mask = kwargs.get("attention_mask")
        if isinstance(mask, torch.Tensor):
            kwargs["attention_mask"] = mask.clone()
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(modeling_llama.LlamaAttention, "forward", copying)
    config = _tiny("llama", 8)
    scenario = MaskScenario(seq_len=24, batch=2, padding=Padding.LEFT)
    report = _probe(config, scenario, dtype="bf16")
    assert report == _probe(config, scenario, dtype="bf16", dense_masks=True)
    assert report.layers[0].band.masked_rows == tuple(24 - n for n in scenario.lengths)


@settings(max_examples=400, deadline=None)
@given(interval_masks(), st.integers(1, 6))
def test_flex_blocks_of_row_intervals_equal_those_of_their_dense_mask(
    case: tuple[RowIntervals, tuple[int, ...]], block: int
) -> None:
    """The O(length) block count (whole blocks by difference array, cut ends by prefix
    sums) against the plain sum over the dense mask, on any interval mask."""
    # Private: the flex block count is held to the plain sum over the dense mask, on any mask drawn.
    from probewise.throughput.attention._paths import flex_blocks

    mask, _documents = case
    assert flex_blocks(mask, block) == flex_blocks(dense_of(mask), block)
