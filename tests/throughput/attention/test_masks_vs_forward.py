"""The mask probe against the real training forward it stands for.

For every bundled family the probe can run (Gemma 2 is refused by design, and by
transformers too), plus Qwen 2 with sliding layers, a tiny *real* model of that
family is built from a shrunk copy of the bundled config (2 layers, the config's
layer types kept: sliding and full where the family has both; a window of 8 tokens so
that sliding layers really slide at 32 tokens) and run as a training step runs it:
``model.train()``, labels given, and the ``use_cache`` / gradient-checkpointing
flags of the case. Every real ``scaled_dot_product_attention`` call is recorded
(mask present, its shape, ``is_causal``), and cross-document attention is found
without reading any mask:

- per layer, by re-running that layer's SDPA call with the keys and values of one
  document perturbed and checking whether the outputs of any *other* document change;
- for the model, by perturbing the first document's tokens and checking whether the
  logits of the later documents change.

The probe is then run on the same shrunk config and scenario, and its per-layer
report (mask present, mask shape, ``is_causal``, cross-document) and ``kv_cache``
must agree with the real forward on every case. When a transformers release changes
the path, this is the suite that notices.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from probewise import UnsupportedModelError
from probewise.throughput.attention.masks import (
    MaskReport,
    MaskScenario,
    Packing,
    bundled_configs,
    probe_masks,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SEQ = 32
DOCUMENTS = (8, 10, 14)  # the last one is longer than the window
WINDOW = 8
REFUSED = {"gemma2-9b"}  # no SDPA in transformers: see test_gemma2_is_refused_by_both


def _bundled(name: str) -> dict[str, object]:
    text = (
        importlib.resources.files("probewise.throughput.attention") / "configs" / f"{name}.json"
    ).read_text(encoding="utf-8")
    data: dict[str, object] = json.loads(text)
    return {k: v for k, v in data.items() if not k.startswith("_probewise")}


def tiny_config(name: str) -> dict[str, object]:
    """The bundled config ``name`` (``+sliding``: with sliding layers switched on),
    shrunk to 2 layers of width 32 that keep its layer types."""
    base, _, variant = name.partition("+")
    data = _bundled(base)
    if variant == "sliding":
        data.update(use_sliding_window=True, max_window_layers=1)
    full = transformers.AutoConfig.for_model(
        str(data["model_type"]), **{k: v for k, v in data.items() if k != "model_type"}
    )
    kinds = list(dict.fromkeys(getattr(full, "layer_types", None) or ["full_attention"]))
    data.pop("sliding_window_pattern", None)
    data.update(
        hidden_size=32,
        intermediate_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=64,
        num_hidden_layers=2,
        layer_types=(kinds * 2)[:2],
        attention_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    if data.get("sliding_window") is not None:
        data["sliding_window"] = WINDOW
    if data.get("attention_chunk_size") is not None:
        data["attention_chunk_size"] = WINDOW  # chunks of 8 tokens: they bite at 32
    if "intermediate_size_mlp" in data:
        data.update(intermediate_size_mlp=32, num_local_experts=2)
    for key, value in (
        ("global_head_dim", 16),
        ("hidden_size_per_layer_input", 4),
        ("vocab_size_per_layer_input", 64),
    ):
        if key in data:
            data[key] = value
    return data


FAMILIES = [*(name for name in bundled_configs() if name not in REFUSED), "qwen2.5-7b+sliding"]


@functools.cache
def real_model(name: str) -> torch.nn.Module:
    data = tiny_config(name)
    config = transformers.AutoConfig.for_model(
        str(data["model_type"]), **{k: v for k, v in data.items() if k != "model_type"}
    )
    torch.manual_seed(0)
    model: torch.nn.Module = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="sdpa"
    )
    return model


@contextmanager
def recorded_sdpa(
    documents: tuple[int, ...] | None,
) -> Iterator[list[tuple[tuple[int, ...] | None, bool, bool | None]]]:
    """Every SDPA call as (mask shape or None, is_causal, crosses documents or None)."""
    functional = torch.nn.functional
    original: Callable[..., torch.Tensor] = functional.scaled_dot_product_attention
    calls: list[tuple[tuple[int, ...] | None, bool, bool | None]] = []

    def record(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        def run(k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return original(
                query,
                k,
                v,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )

        out = run(key, value)
        crosses: bool | None = None
        if documents is not None:
            crosses = False
            start = 0
            with torch.no_grad():
                for length in documents:
                    end = start + length
                    k, v = key.detach().clone(), value.detach().clone()
                    k[:, :, start:end] += 3.0
                    v[:, :, start:end] += 3.0
                    moved = (run(k, v) - out.detach()).abs()
                    outside = torch.cat([moved[:, :, :start], moved[:, :, end:]], dim=2)
                    crosses = crosses or bool((outside > 1e-5).any())
                    start = end
        shape = None if attn_mask is None else tuple(int(s) for s in attn_mask.shape)
        calls.append((shape, bool(is_causal), crosses))
        return out

    functional.scaled_dot_product_attention = record
    try:
        yield calls
    finally:
        functional.scaled_dot_product_attention = original


def real_forward(
    name: str, scenario: MaskScenario
) -> tuple[list[tuple[tuple[int, ...] | None, bool, bool | None]], bool, bool | None]:
    """The real training step's SDPA calls, whether it returned a cache, and whether a
    perturbed first document moves the later documents' logits (None: not packed)."""
    model = real_model(name)
    if scenario.gradient_checkpointing:
        model.activation_checkpointing_enable()
    else:
        model.activation_checkpointing_disable()
    model.train(scenario.training)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 64, (scenario.batch, scenario.seq_len), generator=generator)
    packed = scenario.packing is Packing.POSITION_IDS
    inputs: dict[str, object] = {"labels": ids}
    if scenario.use_cache is not None:
        inputs["use_cache"] = scenario.use_cache
    if packed:
        row = torch.cat([torch.arange(n) for n in scenario.documents])
        inputs["position_ids"] = row.expand(scenario.batch, -1)
    else:
        inputs["attention_mask"] = torch.ones_like(ids)
    with recorded_sdpa(scenario.documents if packed else None) as calls:
        output = model(input_ids=ids, **inputs)
    cache = output.get("cache") is not None or output.get("past_key_values") is not None
    leaks: bool | None = None
    if packed:
        first = scenario.documents[0]
        moved = ids.clone()
        moved[:, :first] = (moved[:, :first] + 1 - 3) % 61 + 3
        # With gradients on, as the step itself: under no_grad transformers keeps the
        # cache even with checkpointing (merge_with_config_defaults).
        other = model(input_ids=moved, **{**inputs, "labels": moved})
        delta = (other.logits[:, first:] - output.logits[:, first:]).abs().max()
        leaks = bool(delta > 1e-4)
    return calls, cache, leaks


def probe_calls(
    report: MaskReport,
) -> list[tuple[tuple[int, ...] | None, bool, bool | None]]:
    return [
        (layer.call.mask_shape, layer.is_causal, layer.cross_document) for layer in report.layers
    ]


CASES = [
    (use_cache, checkpointing, packing)
    for use_cache in (True, False)
    for checkpointing in (False, True)
    for packing in (Packing.NONE, Packing.POSITION_IDS)
]


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize(
    ("use_cache", "checkpointing", "packing"),
    CASES,
    ids=[f"cache-{'on' if c else 'off'}-gc-{'on' if g else 'off'}-{p.value}" for c, g, p in CASES],
)
def test_the_probe_agrees_with_the_real_training_forward(
    name: str, use_cache: bool, checkpointing: bool, packing: Packing
) -> None:
    scenario = MaskScenario(
        seq_len=SEQ,
        packing=packing,
        documents=DOCUMENTS if packing is not Packing.NONE else (),
        use_cache=use_cache,
        gradient_checkpointing=checkpointing,
    )
    calls, cache, leaks = real_forward(name, scenario)
    report = probe_masks(tiny_config(name), scenario, dtype="float32")
    assert len(calls) == 2  # one SDPA call per layer
    assert probe_calls(report) == calls
    assert report.kv_cache is cache
    assert cache is (use_cache and not checkpointing)  # transformers' own rule, in training
    if leaks is not None:
        assert leaks is bool(report.cross_document_layers())
        assert leaks is cache  # the trap: a cache, and documents see each other


def test_the_configs_own_use_cache_is_what_a_plain_forward_uses() -> None:
    # use_cache=None passes nothing: every shrunk config keeps its family's default (true).
    name = "llama3-8b"
    scenario = MaskScenario(seq_len=SEQ, packing=Packing.POSITION_IDS, documents=DOCUMENTS)
    calls, cache, leaks = real_forward(name, scenario)
    report = probe_masks(tiny_config(name), scenario, dtype="float32")
    assert cache
    assert leaks
    assert probe_calls(report) == calls
    data = {**tiny_config(name), "use_cache": False}
    report = probe_masks(data, scenario, dtype="float32")
    assert not report.kv_cache
    assert report.cross_document_layers() == ()


def test_gemma2_is_refused_by_both() -> None:
    data = tiny_config("llama3-8b")
    data.update({k: v for k, v in _bundled("gemma2-9b").items() if k == "model_type"})
    config = transformers.AutoConfig.for_model(
        "gemma2", **{k: v for k, v in data.items() if k != "model_type"}
    )
    with pytest.raises(ValueError, match="scaled_dot_product_attention") as real:
        transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    with pytest.raises(UnsupportedModelError) as probed:
        probe_masks(data, MaskScenario(seq_len=SEQ, attn_implementation="sdpa"), dtype="float32")
    # The same sentence, for the base model the probe builds instead of the LM head one.
    reason = str(real.value).split(". ")[0].removeprefix("Gemma2ForCausalLM")
    assert f"Gemma2Model{reason}" in str(probed.value)


def test_a_model_without_checkpointing_is_refused_by_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.llama import modeling_llama

    monkeypatch.setattr(
        modeling_llama.LlamaPreTrainedModel, "supports_gradient_checkpointing", False
    )
    data = tiny_config("llama3-8b")
    config = transformers.AutoConfig.for_model(
        "llama", **{k: v for k, v in data.items() if k != "model_type"}
    )
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    with pytest.raises(ValueError, match="does not support") as real:
        model.activation_checkpointing_enable()
    scenario = MaskScenario(seq_len=SEQ, gradient_checkpointing=True)
    with pytest.raises(UnsupportedModelError) as probed:
        probe_masks(data, scenario, dtype="float32")
    reason = str(real.value).removeprefix(type(model).__name__)  # "... does not support ..."
    assert reason in str(probed.value)
    probe_masks(data, MaskScenario(seq_len=SEQ), dtype="float32")  # without: it runs


def test_a_forward_transformers_refuses_is_refused_by_the_probe_with_its_reason() -> None:
    # Linear-attention layers only, with the config's cache: transformers' own forward
    # raises in DynamicCache.get_mask_sizes; without a cache it runs (and makes no
    # SDPA call, which the probe reports as such).
    data: dict[str, object] = {
        "model_type": "qwen3_next",
        "hidden_size": 32,
        "intermediate_size": 32,
        "moe_intermediate_size": 8,
        "num_experts": 2,
        "num_experts_per_tok": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "vocab_size": 64,
        "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "linear_attention"],
    }
    config = transformers.AutoConfig.for_model(
        "qwen3_next", **{k: v for k, v in data.items() if k != "model_type"}
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model.train()
    ids = torch.randint(3, 64, (1, SEQ))
    with pytest.raises(ValueError, match="get_mask_sizes") as real:
        model(input_ids=ids, labels=ids)
    with pytest.raises(UnsupportedModelError) as probed:
        probe_masks(data, MaskScenario(seq_len=SEQ), dtype="float32")
    assert str(real.value) in str(probed.value)
    model(input_ids=ids, labels=ids, use_cache=False)
    with pytest.raises(UnsupportedModelError, match="no scaled_dot_product_attention call"):
        probe_masks(data, MaskScenario(seq_len=SEQ, use_cache=False), dtype="bf16")


@pytest.mark.parametrize(
    ("packing", "use_cache"),
    [(Packing.NONE, False), (Packing.POSITION_IDS, False), (Packing.POSITION_IDS, True)],
)
def test_llama4_chunked_layers_read_as_chunked(
    packing: Packing, use_cache: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Llama 4's chunked layers (chunks of 8 here): the band is chunked with its size,
    the packed documents are counted as documents (3, not the 5 blocks the mask has),
    and it is the band of the very mask the real forward hands SDPA."""
    # Private: the band reader reads the real forward's mask, to compare with the band reported.
    from probewise.throughput.attention._band import BandKind, analyse_band

    name = "llama4-scout"
    documents = DOCUMENTS if packing is not Packing.NONE else ()
    scenario = MaskScenario(seq_len=SEQ, packing=packing, documents=documents, use_cache=use_cache)
    original = torch.nn.functional.scaled_dot_product_attention
    masks: list[torch.Tensor | None] = []

    def keep(*args: object, **kwargs: object) -> torch.Tensor:
        mask = kwargs.get("attn_mask")
        masks.append(mask.detach().clone() if isinstance(mask, torch.Tensor) else None)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", keep)
    calls, cache, leaks = real_forward(name, scenario)
    monkeypatch.undo()
    real_masks = masks[: len(calls)]
    report = probe_masks(tiny_config(name), scenario, dtype="float32")
    assert probe_calls(report) == calls
    chunked = [layer for layer in report.layers if layer.layer_type == "chunked_attention"]
    assert chunked
    for layer in chunked:
        assert layer.band.kind is BandKind.CHUNKED
        assert layer.band.chunk_size == WINDOW
        real = real_masks[report.layers.index(layer)]
        assert real is not None
        assert layer.band == analyse_band(
            real[:, 0].numpy(), chunk_size=WINDOW, documents=scenario.documents
        )
        if packing is Packing.NONE or cache:  # chunks over the whole row
            assert layer.band.describe() == f"chunked, chunks of {WINDOW}"
        else:
            assert (
                layer.band.describe() == f"chunked, chunks of {WINDOW} inside 3 documents per row"
            )
        assert any(f"chunked, chunks of {WINDOW}" in r for r in layer.lost_reasons())
    if leaks is not None:
        assert leaks is cache is bool(report.cross_document_layers())
