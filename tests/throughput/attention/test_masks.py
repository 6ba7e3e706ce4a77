"""The mask probe over every family x scenario, against tables verified by hand.

The expectations come from reading transformers 5.25's ``masking_utils`` and
``sdpa_attention_forward`` (and were then checked against the probe's output):

- ``_ignore_causal_mask_sdpa`` drops the mask (``is_causal=True`` instead) when no
  padding is present, except when ``kv_length >= local_size``: so a sliding layer at
  a sequence length *equal* to its window materialises a mask that is plain causal
  (the first trap);
- ``_preprocess_mask_arguments`` looks for packing in ``position_ids`` only when the
  2-D attention mask is ``None``: packing plus an all-ones mask gives a plain causal
  ``is_causal=True`` call over the whole row (the second trap);
- ``use_gqa_in_sdpa`` passes ``enable_gqa=True`` only with no mask and head dims
  <= 256, otherwise ``repeat_kv`` (the third trap: Gemma 4's 512-dim global layers).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise import (
    CrossDocumentAttentionError,
    FastPathLostError,
    InvalidInputError,
    UnsupportedModelError,
)
from probewise.throughput.attention.masks import (
    BandKind,
    GqaHandling,
    LayerAttention,
    MaskReport,
    MaskScenario,
    Packing,
    Padding,
    bundled_configs,
    probe_masks,
)
from probewise.throughput.attention.sdpa import AttentionDtype, MaskKind, SdpaBackend

pytest.importorskip("transformers")

FAMILIES = ("llama3-8b", "mistral-7b", "qwen2.5-7b", "qwen3-8b", "gemma3-27b", "gemma4")


@functools.cache
def probe(
    config: str,
    seq: int,
    *,
    batch: int = 1,
    padding: Padding = Padding.NONE,
    packing: Packing = Packing.NONE,
    capability: tuple[int, int] = (9, 0),
    use_cache: bool | None = None,
    gradient_checkpointing: bool = False,
) -> MaskReport:
    return probe_masks(
        config,
        MaskScenario(
            seq_len=seq,
            batch=batch,
            padding=padding,
            packing=packing,
            use_cache=use_cache,
            gradient_checkpointing=gradient_checkpointing,
        ),
        dtype="bfloat16",
        capability=capability,
    )


def bundled(name: str) -> dict[str, object]:
    import importlib.resources

    text = (
        importlib.resources.files("probewise.throughput.attention") / "configs" / f"{name}.json"
    ).read_text()
    data: dict[str, object] = json.loads(text)
    return data


def of_type(report: MaskReport, layer_type: str) -> list[LayerAttention]:
    return [layer for layer in report.layers if layer.layer_type == layer_type]


def assert_fast(layer: LayerAttention, *, native_gqa: bool = True) -> None:
    assert layer.mask is MaskKind.NONE
    assert layer.is_causal
    assert layer.band.kind is BandKind.NONE
    assert layer.mask_bytes == 0
    assert layer.gqa is (GqaHandling.NATIVE if native_gqa else GqaHandling.NONE)
    assert layer.fast_path
    assert layer.lost_reasons() == ()


def assert_masked(layer: LayerAttention, kind: BandKind) -> None:
    assert layer.mask is MaskKind.BOOLEAN
    assert not layer.is_causal
    assert layer.band.kind is kind
    assert layer.gqa is GqaHandling.REPEATED  # a mask rules out enable_gqa on CUDA
    assert layer.call.kv_heads == layer.call.query_heads
    assert not layer.fast_path
    assert "flash: attn_mask is not None" in layer.prediction.ruling(SdpaBackend.FLASH).reasons


def test_bundled_configs_are_listed() -> None:
    assert set(FAMILIES) | {"gemma2-9b"} <= set(bundled_configs())


@pytest.mark.parametrize("family", FAMILIES)
def test_no_padding_below_any_window_keeps_the_fast_path_everywhere(family: str) -> None:
    report = probe(family, 256)
    config = bundled(family)
    assert len(report.layers) == config["num_hidden_layers"]
    assert [layer.index for layer in report.layers] == list(range(len(report.layers)))
    for layer in report.layers:
        if family == "gemma4" and layer.layer_type == "full_attention":
            continue  # the head-dim trap, below
        assert_fast(layer)
        assert layer.call.head_dim == config.get("head_dim", 128)
        assert layer.call.query_heads == config["num_attention_heads"]
        assert layer.kv_heads == config["num_key_value_heads"]
        assert layer.call.dtype is AttentionDtype.BFLOAT16
        assert layer.backend in (SdpaBackend.FLASH, SdpaBackend.CUDNN)
    report.assert_fast_path(
        layer_types=["sliding_attention"] if family.startswith("gemma") else None
    )


def test_layer_pattern_of_gemma3_27b() -> None:
    report = probe("gemma3-27b", 256)
    full = [layer.index for layer in of_type(report, "full_attention")]
    assert full == list(range(5, 62, 6))  # 5 sliding per full layer, 62 layers
    assert {layer.sliding_window for layer in of_type(report, "sliding_attention")} == {1024}
    assert report.layer_types == ("sliding_attention", "full_attention")


@pytest.mark.parametrize(("family", "window"), [("gemma3-27b", 1024), ("mistral-7b", 4096)])
def test_trap_sequence_equal_to_the_window_materialises_plain_causal(
    family: str, window: int
) -> None:
    report = probe(family, window)
    sliding = of_type(report, "sliding_attention")
    assert sliding
    for layer in sliding:
        assert_masked(layer, BandKind.CAUSAL)
        assert not layer.band.padded
        assert layer.mask_redundant
        assert layer.mask_bytes == window * window  # one bool per (query, key), batch 1
        assert any("identical to what is_causal expresses" in r for r in layer.lost_reasons())
    for layer in of_type(report, "full_attention"):
        assert_fast(layer)
    with pytest.raises(FastPathLostError) as caught:
        report.assert_fast_path()
    message = str(caught.value)
    assert f"{len(sliding)} of {len(report.layers)} layers" in message
    assert "sliding_attention" in message


@pytest.mark.parametrize(("family", "window"), [("gemma3-27b", 1024), ("mistral-7b", 4096)])
def test_sequence_below_and_above_the_window(family: str, window: int) -> None:
    below = probe(family, window - 1)
    for layer in below.layers:
        assert_fast(layer)
    above = probe(family, window + 512)
    for layer in of_type(above, "sliding_attention"):
        assert_masked(layer, BandKind.SLIDING_WINDOW)
        assert layer.band.window == window
        assert not layer.mask_redundant
    for layer in of_type(above, "full_attention"):
        assert_fast(layer)
    if family == "gemma3-27b":
        above.assert_fast_path(layer_types=["full_attention"])
        with pytest.raises(FastPathLostError):
            above.assert_fast_path(layer_types=["sliding_attention"])


@pytest.mark.parametrize("family", ["llama3-8b", "gemma3-27b", "gemma4"])
@pytest.mark.parametrize("side", [Padding.RIGHT, Padding.LEFT])
def test_padding_materialises_a_mask_with_padding_columns(family: str, side: Padding) -> None:
    report = probe(family, 512, batch=2, padding=side)
    lengths = report.scenario.lengths
    assert lengths == (384, 256)
    for layer in report.layers:
        assert_masked(layer, BandKind.CAUSAL)
        assert layer.band.padding_columns == (128, 256)
        assert layer.band.masked_rows == ((128, 256) if side is Padding.LEFT else (0, 0))
        assert not layer.mask_redundant
        assert layer.mask_bytes == 2 * 512 * 512


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("use_cache", "checkpointing"),
    [(False, False), (None, True)],
    ids=["no-cache", "checkpointing"],
)
def test_packing_by_position_ids_without_a_cache_builds_block_diagonal_masks(
    family: str, use_cache: bool | None, checkpointing: bool
) -> None:
    report = probe(
        family,
        1024,
        batch=2,
        packing=Packing.POSITION_IDS,
        use_cache=use_cache,
        gradient_checkpointing=checkpointing,
    )
    assert not report.kv_cache
    assert report.scenario.documents == (256, 256, 256, 256)
    for layer in report.layers:
        assert_masked(layer, BandKind.BLOCK_DIAGONAL)
        assert layer.band.segments == ((256,) * 4, (256,) * 4)
        assert layer.band.window is None  # documents are shorter than every window
        assert layer.cross_document is False
    report.assert_no_cross_document()
    with pytest.raises(FastPathLostError):
        report.assert_fast_path()


@pytest.mark.parametrize("family", FAMILIES)
def test_trap_packing_by_position_ids_with_the_configs_use_cache_attends_across(
    family: str,
) -> None:
    # use_cache is true in every bundled config (the families' default): transformers
    # builds a DynamicCache, and masking_utils._preprocess_mask_arguments looks for
    # packing only when the cache is None. Full layers (and sliding ones whose window
    # covers the row) run is_causal=True over the whole row.
    report = probe(family, 256, batch=2, packing=Packing.POSITION_IDS)
    assert report.kv_cache
    assert report.cross_document_layers() == report.layers
    for layer in report.layers:
        assert layer.mask is MaskKind.NONE
        assert layer.is_causal
    with pytest.raises(CrossDocumentAttentionError, match=r"config\.use_cache=False"):
        report.assert_no_cross_document()
    # An inference forward with gradient checkpointing on keeps the cache: transformers
    # turns it off only in training, with gradients on.
    inference = probe_masks(
        family,
        MaskScenario(
            seq_len=256, packing=Packing.POSITION_IDS, training=False, gradient_checkpointing=True
        ),
        dtype="bf16",
    )
    assert inference.kv_cache
    assert inference.cross_document_layers() == inference.layers


def test_packed_documents_longer_than_the_window_get_a_window_inside() -> None:
    report = probe("gemma3-27b", 6144, packing=Packing.POSITION_IDS, use_cache=False)
    for layer in of_type(report, "sliding_attention"):
        assert layer.band.kind is BandKind.BLOCK_DIAGONAL
        assert layer.band.window == 1024
        assert layer.band.segments == ((1536,) * 4,)
    for layer in of_type(report, "full_attention"):
        assert layer.band.window is None
    assert report.cross_document_layers() == ()


@pytest.mark.parametrize("family", FAMILIES)
def test_trap_packing_with_an_all_ones_mask_attends_across_documents(family: str) -> None:
    report = probe(family, 256, batch=2, packing=Packing.ALL_ONES_MASK)  # below every window
    for layer in report.layers:
        assert layer.cross_document is True
        if family == "gemma4" and layer.layer_type == "full_attention":
            continue
        assert_fast(layer)  # fast, and wrong: one causal run over all four documents
    with pytest.raises(CrossDocumentAttentionError) as caught:
        report.assert_fast_path()
    assert f"{len(report.layers)} of {len(report.layers)} layers" in str(caught.value)
    assert "0-" in str(caught.value)


def test_trap_gemma4_global_head_dim_512_loses_flash_and_native_gqa() -> None:
    report = probe("gemma4", 256)
    full = of_type(report, "full_attention")
    assert [layer.index for layer in full] == [5, 11, 17, 23, 29]
    for layer in full:
        assert layer.call.head_dim == 512
        assert layer.mask is MaskKind.NONE
        assert layer.is_causal
        assert layer.gqa is GqaHandling.REPEATED  # use_gqa_in_sdpa: head dim > 256
        assert "flash: head_dim 512 > 256" in layer.prediction.ruling(SdpaBackend.FLASH).reasons
        assert layer.backend not in (SdpaBackend.FLASH, SdpaBackend.CUDNN)
        assert not layer.fast_path
    with pytest.raises(FastPathLostError) as caught:
        report.assert_fast_path()
    assert "layers 5, 11, 17, 23, 29 (full_attention)" in str(caught.value)
    report.assert_fast_path(layer_types=["sliding_attention"])


def test_qwen3_slides_only_from_max_window_layers_on() -> None:
    config = bundled("qwen3-8b")
    config.update(use_sliding_window=True, sliding_window=512, max_window_layers=28)
    report = probe_masks(config, MaskScenario(seq_len=1024), dtype="bf16")
    assert [layer.layer_type for layer in report.layers] == ["full_attention"] * 28 + [
        "sliding_attention"
    ] * 8
    for layer in report.layers[:28]:
        assert_fast(layer)
    for layer in report.layers[28:]:
        assert_masked(layer, BandKind.SLIDING_WINDOW)
        assert layer.band.window == 512


def test_qwen25_as_published_has_no_sliding_layers() -> None:
    report = probe("qwen2.5-7b", 256)
    assert report.layer_types == ("full_attention",)


def test_gemma2_under_sdpa_is_a_clear_error_and_loads_eager_by_default() -> None:
    scenario = MaskScenario(seq_len=64, attn_implementation="sdpa")
    with pytest.raises(UnsupportedModelError, match="does not support attn_implementation='sdpa'"):
        probe_masks("gemma2-9b", scenario, dtype="bf16")
    # What the config would load: transformers falls back to eager for Gemma 2.
    report = probe_masks("gemma2-9b", MaskScenario(seq_len=64), dtype="bf16")
    assert report.attn_implementation == "eager"
    assert all(layer.prediction is None and not layer.fast_path for layer in report.layers)


def test_a_config_with_per_layer_overrides_is_a_clear_error() -> None:
    # transformers 5's per_layer_config: reading a per-layer attribute from the config
    # raises a RuntimeError of transformers' own, which must not escape the probe.
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers.PretrainedConfig, "per_layer_config"):
        pytest.skip(f"transformers {transformers.__version__} has no per_layer_config")
    fields = {k: v for k, v in bundled("mistral-7b").items() if k != "model_type"}
    fields["num_hidden_layers"] = 2
    config = transformers.MistralConfig(**fields, per_layer_config={0: {"sliding_window": 64}})
    with pytest.raises(UnsupportedModelError, match="per_layer_config"):
        probe_masks(config, MaskScenario(seq_len=128), dtype="bf16")


def test_capability_changes_the_prediction_not_the_masks() -> None:
    hopper = probe("llama3-8b", 256)
    old = probe("llama3-8b", 256, capability=(7, 0))
    assert [layer.band for layer in hopper.layers] == [layer.band for layer in old.layers]
    assert all(layer.backend not in (SdpaBackend.FLASH, SdpaBackend.CUDNN) for layer in old.layers)


def test_config_inputs_path_folder_dict_and_errors(tmp_path: Path) -> None:
    data = bundled("llama3-8b")
    data["num_hidden_layers"] = 2
    (tmp_path / "config.json").write_text(json.dumps(data))
    scenario = MaskScenario(seq_len=64)
    for config in (tmp_path / "config.json", tmp_path, str(tmp_path / "config.json"), data):
        report = probe_masks(config, scenario, dtype="float16")
        assert len(report.layers) == 2
        assert report.dtype is AttentionDtype.FLOAT16
    with pytest.raises(InvalidInputError, match="no config file"):
        probe_masks(tmp_path / "missing.json", scenario, dtype="bf16")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match="cannot read"):
        probe_masks(tmp_path / "bad.json", scenario, dtype="bf16")
    with pytest.raises(InvalidInputError, match="model_type"):
        probe_masks({"hidden_size": 8}, scenario, dtype="bf16")
    with pytest.raises(InvalidInputError, match="dtype"):
        probe_masks(data, scenario, dtype="int8")
    with pytest.raises(InvalidInputError, match="capability"):
        probe_masks(data, scenario, dtype="bf16", capability=(9,))  # type: ignore[arg-type]


def test_torch_dtype_is_accepted() -> None:
    import torch

    data = bundled("llama3-8b")
    data["num_hidden_layers"] = 1
    report = probe_masks(data, MaskScenario(seq_len=32), dtype=torch.float32)
    assert report.dtype is AttentionDtype.FLOAT32
    assert report.layers[0].call.dtype is AttentionDtype.FLOAT32


def test_scenario_validation() -> None:
    with pytest.raises(InvalidInputError):
        MaskScenario(seq_len=0)
    with pytest.raises(InvalidInputError, match="prefill or training"):
        MaskScenario(seq_len=1)
    with pytest.raises(InvalidInputError, match="one length per batch row"):
        MaskScenario(seq_len=8, batch=2, padding=Padding.RIGHT, lengths=(8,))
    with pytest.raises(InvalidInputError, match=r"\[1, seq_len=8\]"):
        MaskScenario(seq_len=8, padding=Padding.RIGHT, lengths=(9,))
    with pytest.raises(InvalidInputError, match="only with padding"):
        MaskScenario(seq_len=8, lengths=(4,))
    with pytest.raises(InvalidInputError, match="sum to seq_len"):
        MaskScenario(seq_len=8, packing=Packing.POSITION_IDS, documents=(4, 3))
    with pytest.raises(InvalidInputError, match="not both"):
        MaskScenario(seq_len=8, padding=Padding.RIGHT, packing=Packing.POSITION_IDS)
    assert MaskScenario(seq_len=10, packing=Packing.POSITION_IDS).documents == (2, 2, 2, 4)
    assert MaskScenario(seq_len=100, batch=1, padding=Padding.LEFT).lengths == (50,)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"seq_len": float("nan")}, "seq_len"),
        ({"seq_len": 64.0}, "seq_len"),
        ({"seq_len": "64"}, "seq_len"),
        ({"seq_len": True}, "seq_len"),
        ({"seq_len": 64, "batch": float("inf")}, "batch"),
        ({"seq_len": 64, "batch": 0, "padding": Padding.RIGHT}, "batch"),
        ({"seq_len": 0, "packing": Packing.POSITION_IDS}, "seq_len"),
        ({"seq_len": 8, "padding": Padding.RIGHT, "lengths": (4.5,)}, "lengths"),
        ({"seq_len": 8, "padding": Padding.RIGHT, "lengths": 4}, "lengths"),
        (
            {"seq_len": 8, "packing": Packing.POSITION_IDS, "documents": (4, float("nan"))},
            "documents",
        ),
        ({"seq_len": 8, "padding": "sideways"}, "padding"),
        ({"seq_len": 8, "packing": 3}, "packing"),
        ({"seq_len": 8, "training": "yes"}, "training"),
        ({"seq_len": 8, "use_cache": 1}, "use_cache"),
        ({"seq_len": 8, "gradient_checkpointing": None}, "gradient_checkpointing"),
    ],
)
def test_scenario_refuses_values_of_the_wrong_type_naming_the_field(
    fields: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInputError, match=field):
        MaskScenario(**fields)  # type: ignore[arg-type]


def test_scenario_takes_integers_of_any_integer_type_and_enum_values() -> None:
    import numpy as np

    scenario = MaskScenario(
        seq_len=np.int64(8),  # type: ignore[arg-type]
        padding="right",  # type: ignore[arg-type]
        lengths=[np.int32(4)],
    )
    assert scenario.seq_len == 8
    assert type(scenario.seq_len) is int
    assert scenario.padding is Padding.RIGHT
    assert scenario.lengths == (4,)


def tiny(model_type: str, **fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "model_type": model_type,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
        "vocab_size": 100,
    }
    base.update(fields)
    return base


def test_the_probe_leaves_torch_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers.models.llama import modeling_llama

    before = torch.nn.functional.scaled_dot_product_attention
    grad = torch.is_grad_enabled()
    config = tiny("llama", hidden_size=64, num_attention_heads=4, num_key_value_heads=2)
    probe_masks(config, MaskScenario(seq_len=16), dtype="bf16")  # not the cached probe
    assert torch.nn.functional.scaled_dot_product_attention is before
    assert torch.is_grad_enabled() is grad

    def broken(self: object, hidden_states: torch.Tensor) -> torch.Tensor:
        raise KeyError("planted")

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", broken)
    with pytest.raises(UnsupportedModelError, match="KeyError"):
        probe_masks(config, MaskScenario(seq_len=16), dtype="bf16")
    assert torch.nn.functional.scaled_dot_product_attention is before
    assert torch.is_grad_enabled() is grad
    q = torch.ones(1, 1, 4, 8)
    assert torch.allclose(torch.nn.functional.scaled_dot_product_attention(q, q, q), q)


def test_other_threads_keep_the_real_sdpa_during_a_probe() -> None:
    import threading

    import torch

    q = torch.ones(1, 1, 4, 8)
    stop = threading.Event()
    bad: list[int] = []
    calls: list[int] = []

    def hammer() -> None:
        while not stop.is_set():
            out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
            calls.append(1)
            if not torch.allclose(out, q):
                bad.append(1)

    worker = threading.Thread(target=hammer)
    worker.start()
    try:
        report = probe_masks("gemma3-27b", MaskScenario(seq_len=64), dtype="bf16")
    finally:
        stop.set()
        worker.join()
    assert calls
    assert bad == []
    assert len(report.layers) == 62  # the other thread's calls were not recorded


def test_a_family_that_derives_head_dim_from_hidden_size() -> None:
    # GPT-NeoX reads hidden_size // heads: the narrow model would record head dim 1, so
    # the probe runs again at the config's own width.
    config = tiny("gpt_neox", hidden_size=4096, num_attention_heads=32)
    report = probe_masks(config, MaskScenario(seq_len=32), dtype="bf16")
    assert [layer.call.head_dim for layer in report.layers] == [128, 128]
    assert all(layer.fast_path for layer in report.layers)


def test_falcon_and_gpt2_names_are_read() -> None:
    falcon = tiny(
        "falcon",
        hidden_size=256,
        num_attention_heads=8,
        new_decoder_architecture=True,
        num_kv_heads=2,
    )
    report = probe_masks(falcon, MaskScenario(seq_len=32), dtype="bf16")
    assert {(layer.call.head_dim, layer.kv_heads) for layer in report.layers} == {(32, 2)}
    gpt2 = {"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 2, "vocab_size": 100}
    report = probe_masks(gpt2, MaskScenario(seq_len=32), dtype="bf16")
    assert {layer.call.head_dim for layer in report.layers} == {32}


def test_no_sdpa_call_at_all_is_an_error_not_an_empty_pass() -> None:
    config = tiny(
        "qwen3_next",
        hidden_size=256,
        num_attention_heads=8,
        num_key_value_heads=2,
        layer_types=["linear_attention", "linear_attention"],
    )
    with pytest.raises(UnsupportedModelError, match="no scaled_dot_product_attention call"):
        probe_masks(config, MaskScenario(seq_len=16, use_cache=False), dtype="bf16")
    # With the config's use_cache (true), transformers' own forward refuses this model;
    # the probe says so with transformers' reason.
    with pytest.raises(UnsupportedModelError, match="get_mask_sizes"):
        probe_masks(config, MaskScenario(seq_len=16), dtype="bf16")


# The predicted backend per (scenario, layer type, capability), checked by hand against
# the rules in probewise.throughput.attention.sdpa: on sm90 cuDNN comes first in torch 2.13's
# order (check_prefer_cudnn_attention) and takes masks and GQA up to head dim 128; on
# sm80 the order is flash, efficient, math; flash refuses any mask and head dims
# above 256; efficient refuses unequal heads (native GQA), so it runs after repeat_kv.
BACKENDS = [
    ("llama3-8b", 256, Padding.NONE, "full_attention", (9, 0), SdpaBackend.CUDNN),
    ("llama3-8b", 256, Padding.NONE, "full_attention", (8, 0), SdpaBackend.FLASH),
    ("llama3-8b", 256, Padding.RIGHT, "full_attention", (9, 0), SdpaBackend.CUDNN),
    ("llama3-8b", 256, Padding.RIGHT, "full_attention", (8, 0), SdpaBackend.EFFICIENT),
    ("gemma3-27b", 2048, Padding.NONE, "sliding_attention", (9, 0), SdpaBackend.CUDNN),
    ("gemma3-27b", 2048, Padding.NONE, "sliding_attention", (8, 0), SdpaBackend.EFFICIENT),
    ("gemma3-27b", 2048, Padding.NONE, "full_attention", (8, 0), SdpaBackend.FLASH),
    (
        "gemma4",
        256,
        Padding.NONE,
        "sliding_attention",
        (9, 0),
        SdpaBackend.FLASH,
    ),  # d=256: no cuDNN
    ("gemma4", 256, Padding.NONE, "full_attention", (9, 0), SdpaBackend.EFFICIENT),  # d=512
    ("gemma4", 1024, Padding.NONE, "sliding_attention", (9, 0), SdpaBackend.EFFICIENT),
]


@pytest.mark.parametrize(
    ("family", "seq", "padding", "layer_type", "capability", "backend"), BACKENDS
)
def test_predicted_backend_per_layer(
    family: str,
    seq: int,
    padding: Padding,
    layer_type: str,
    capability: tuple[int, int],
    backend: SdpaBackend,
) -> None:
    batch = 2 if padding is not Padding.NONE else 1
    report = probe(family, seq, batch=batch, padding=padding, capability=capability)
    layers = of_type(report, layer_type)
    assert layers
    assert {layer.backend for layer in layers} == {backend}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"num_attention_heads": 30, "num_key_value_heads": 6}, "attention heads"),
        ({"layer_types": ["full_attention", "bogus"]}, "layer_types"),
        ({"layer_types": ["full_attention"]}, "layer_types"),
        ({"rope_scaling": {"rope_type": "nope", "factor": 2.0}}, "rope_type 'nope'"),
    ],
)
def test_a_config_transformers_refuses_is_an_input_error_naming_the_field(
    fields: dict[str, object], named: str
) -> None:
    # Before: StrictDataclass*ValidationError, ZeroDivisionError or KeyError tracebacks.
    data = {**bundled("llama3-8b"), "num_hidden_layers": 2, **fields}
    with pytest.raises(InvalidInputError, match=named) as caught:
        probe_masks(data, MaskScenario(seq_len=16), dtype="bf16")
    assert "\n" not in str(caught.value)


def test_an_unknown_model_type_is_unsupported() -> None:
    with pytest.raises(UnsupportedModelError, match="no model_type 'no-such-model'"):
        probe_masks({"model_type": "no-such-model"}, MaskScenario(seq_len=16), dtype="bf16")


def _valid_name(name: str) -> bool:
    """transformers' names, flash_attention_N, or a hub kernel org/name[@rev][:kernel]."""
    if name in ("eager", "sdpa", "flex_attention") or re.fullmatch(r"flash_attention_[0-9]+", name):
        return True
    repo = re.split("[@:]", name, maxsplit=1)[0]
    parts = repo.split("/")
    return len(parts) == 2 and all(part.strip() for part in parts)


@given(st.text(max_size=40) | st.sampled_from(["eager", "flash_attention_3", "org/kernel"]))
def test_attn_implementation_names_are_checked_in_one_line(name: str) -> None:
    if _valid_name(name):
        scenario = MaskScenario(seq_len=8, attn_implementation=name)
        assert name in scenario.describe()
    else:
        with pytest.raises(InvalidInputError, match=r"^attn_implementation must be one of"):
            MaskScenario(seq_len=8, attn_implementation=name)


def test_attn_implementation_names() -> None:
    for name in ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3"):
        assert MaskScenario(seq_len=8, attn_implementation=name).attn_implementation == name
    hub = MaskScenario(seq_len=8, attn_implementation="kernels-community/flash-attn2@v1:fa")
    assert hub.attn_implementation == "kernels-community/flash-attn2@v1:fa"
    for bad in ("", "flash", "flash_attention_x", "a/b/c", "/x"):
        with pytest.raises(InvalidInputError, match="attn_implementation must be one of"):
            MaskScenario(seq_len=8, attn_implementation=bad)
    with pytest.raises(InvalidInputError, match="must be a str or None"):
        MaskScenario(seq_len=8, attn_implementation=3)  # type: ignore[arg-type]


def test_the_configs_own_attn_implementation_is_what_loads() -> None:
    data = {**bundled("llama3-8b"), "num_hidden_layers": 2}
    assert probe_masks(data, MaskScenario(seq_len=64), dtype="bf16").attn_implementation == "sdpa"
    own = {**data, "attn_implementation": "eager"}
    report = probe_masks(own, MaskScenario(seq_len=64), dtype="bf16")
    assert report.attn_implementation == "eager"
    assert all(layer.kernel.implementation == "eager" for layer in report.layers)
    chosen = MaskScenario(seq_len=64, attn_implementation="flex_attention")
    assert probe_masks(own, chosen, dtype="bf16").attn_implementation == "flex_attention"
    with pytest.raises(InvalidInputError, match="attn_implementation must be one of"):
        probe_masks(
            {**data, "attn_implementation": "nonsense"}, MaskScenario(seq_len=64), dtype="bf16"
        )


def test_llama4_refuses_flash_with_transformers_own_reason() -> None:
    scenario = MaskScenario(seq_len=64, attn_implementation="flash_attention_2")
    with pytest.raises(UnsupportedModelError, match="does not support") as refused:
        probe_masks("llama4-scout", scenario, dtype="bf16")
    assert "transformers says" in str(refused.value)
