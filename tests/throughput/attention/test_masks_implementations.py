"""The mask probe under eager, flex_attention and FlashAttention, against real forwards.

Tiny *real* models (random weights) of Llama 3, Gemma 2 (soft-capping, no SDPA path),
gpt-oss (attention sinks, sliding layers; no SDPA path) and Llama 4 (chunked layers)
run a packed batch under each implementation, with and without a KV cache; the
ground truth for cross-document attention is a perturbation: change the first
document's tokens and see whether the logits of the later documents move. The probe
must say the same. Under eager, the bytes of every mask transformers built must be
the probe's; under flex, the blocks of every ``BlockMask`` transformers built.

FlashAttention cannot run here: the real model runs transformers' own flash forward
(``flash_attention_forward`` -> ``_flash_attention_forward``) with a *reference*
kernel in place of flash-attn's, one that computes attention for real over each
varlen sequence (or each whole row), so the perturbation is real too, and the
boundaries the kernel is given are checked against the documents.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from test_masks_vs_forward import tiny_config

from probewise.throughput.attention.masks import MaskReport, MaskScenario, Packing, probe_masks

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import masking_utils  # noqa: E402
from transformers import modeling_flash_attention_utils as fa_utils  # noqa: E402

# transformers' flex_attention_mask passes create_block_mask(_compile=True), which torch
# 2.13 deprecates, and torch.compile's imports warn of their own deprecations: theirs
# to change, not failures of the probe.
pytestmark = [
    pytest.mark.filterwarnings("ignore:_compile flag on create_block_mask:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*"),
    # flex_uncompiled runs flex_attention uncompiled on purpose (see there)
    pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile:UserWarning"),
]

SEQ = 32
DOCUMENTS = (8, 10, 14)
GPT_OSS: dict[str, object] = {
    "model_type": "gpt_oss",
    "hidden_size": 32,
    "intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "vocab_size": 64,
    "num_hidden_layers": 2,
    "num_local_experts": 2,
    "num_experts_per_tok": 1,
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 8,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def config_of(name: str) -> dict[str, object]:
    return dict(GPT_OSS) if name == "gpt-oss" else tiny_config(name)


@functools.cache
def real_model(name: str, implementation: str) -> torch.nn.Module:
    data = config_of(name)
    config = transformers.AutoConfig.for_model(
        str(data["model_type"]), **{k: v for k, v in data.items() if k != "model_type"}
    )
    torch.manual_seed(0)
    flash = implementation.startswith("flash")
    model: torch.nn.Module = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager" if flash else implementation
    )
    if flash:  # no flash-attn here: switched as the probe does, kernels stand in below
        model.config._attn_implementation = implementation
    return model.eval()


def leaks(name: str, implementation: str, scenario: MaskScenario) -> bool:
    """Whether a perturbed first document moves the later documents' logits."""
    model = real_model(name, implementation)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 64, (scenario.batch, SEQ), generator=generator)
    row = torch.cat([torch.arange(n) for n in scenario.documents])
    inputs: dict[str, object] = {
        "position_ids": row.expand(scenario.batch, -1),
        "use_cache": scenario.use_cache,
    }
    first = scenario.documents[0]
    moved = ids.clone()
    moved[:, :first] = (moved[:, :first] + 1 - 3) % 61 + 3
    with torch.no_grad():  # flex_attention has no CPU backward
        out = model(input_ids=ids, **inputs).logits
        other = model(input_ids=moved, **inputs).logits
    return bool((other[:, first:] - out[:, first:]).abs().max() > 1e-4)


def probe(name: str, scenario: MaskScenario) -> MaskReport:
    # gpt-oss's experts (grouped_mm) take bf16 only, also on the meta device.
    return probe_masks(config_of(name), scenario, dtype=dtype_of(name))


def dtype_of(name: str) -> str:
    return "bfloat16" if name == "gpt-oss" else "float32"


def scenario(implementation: str, use_cache: bool, batch: int = 1) -> MaskScenario:
    return MaskScenario(
        seq_len=SEQ,
        batch=batch,
        packing=Packing.POSITION_IDS,
        documents=DOCUMENTS,
        use_cache=use_cache,
        training=False,
        attn_implementation=implementation,
    )


@contextmanager
def captured_masks(name: str) -> Iterator[list[object]]:
    """Every mask transformers' builder ``name`` returns during the block."""
    interface = masking_utils.AttentionMaskInterface
    original = interface._global_mapping[name]
    built: list[object] = []

    def keep(*args: object, **kwargs: object) -> object:
        mask = original(*args, **kwargs)
        built.append(mask)
        return mask

    interface._global_mapping[name] = keep
    try:
        yield built
    finally:
        interface._global_mapping[name] = original


EAGER_CASES = [
    (family, cache)
    for family in ("llama3-8b", "gemma2-9b", "gpt-oss", "llama4-scout")
    for cache in (False, True)
]


@pytest.mark.parametrize(("family", "use_cache"), EAGER_CASES)
def test_eager_verdicts_and_mask_bytes_match_the_real_forward(family: str, use_cache: bool) -> None:
    case = scenario("eager", use_cache)
    with captured_masks("eager") as built:
        truth = leaks(family, "eager", case)
    report = probe(family, case)
    assert report.attn_implementation == "eager"
    assert truth is bool(report.cross_document_layers())
    # A cache skips packing detection under eager too; and GptOssModel (transformers
    # 5.25) never passes position_ids to its mask builders, so its packed documents
    # see each other with or without one.
    assert truth is (use_cache or family == "gpt-oss")
    # Elements, not bytes: the real model runs in float32, gpt-oss's probe in bf16.
    real = {m.untyped_storage().nbytes() // m.element_size() for m in built if m is not None}
    size = torch.finfo(getattr(torch, dtype_of(family))).bits // 8
    assert {layer.mask_bytes // size for layer in report.layers} == real
    assert all(not layer.fast_path and layer.prediction is None for layer in report.layers)


def _block_counts(mask: object) -> tuple[int, int, int]:
    tensors = [
        getattr(mask, n)
        for n in (
            "kv_num_blocks",
            "kv_indices",
            "full_kv_num_blocks",
            "full_kv_indices",
            "q_num_blocks",
            "q_indices",
            "full_q_num_blocks",
            "full_q_indices",
        )
    ]
    full = mask.full_kv_num_blocks
    return (
        0 if full is None else int(full.sum()),
        int(mask.kv_num_blocks.sum()),
        sum(int(t.untyped_storage().nbytes()) for t in tensors if t is not None),
    )


@contextmanager
def flex_without_sinks() -> Iterator[None]:
    """transformers' flex forward with ``s_aux`` dropped: it refuses attention sinks on
    CPU. Sinks add one logit per head to each query's softmax; they move no token's
    information to another, so the cross-document truth is the mask's either way."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    mapping = ALL_ATTENTION_FUNCTIONS._global_mapping
    original = mapping["flex_attention"]

    def without(*args: object, **kwargs: object) -> object:
        kwargs.pop("s_aux", None)
        return original(*args, **kwargs)

    mapping["flex_attention"] = without
    try:
        yield
    finally:
        mapping["flex_attention"] = original


def block_mask_uncompiled(*args: object, _compile: bool = False, **kwargs: object) -> object:
    """``create_block_mask`` built without torch.compile, whatever the caller asks:
    transformers passes ``_compile=True``, which would override a partial's keyword."""
    from torch.nn.attention import flex_attention

    del _compile
    return flex_attention.create_block_mask(*args, _compile=False, **kwargs)


@pytest.fixture
def flex_uncompiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' flex path with torch.compile left out: ``create_block_mask`` with
    ``_compile=False`` and ``flex_attention`` itself in place of the compiled one.
    Compiling changes neither the blocks (torch builds the same BlockMask either way)
    nor which scores are masked (the eager flex_attention is torch's reference for
    the compiled kernel), so the perturbation truth is the same; it costs about 50 s
    of inductor compiling on a 2-core CPU, which is all this spares."""
    from torch.nn.attention import flex_attention
    from transformers.integrations import flex_attention as hf_flex

    monkeypatch.setattr(masking_utils, "create_block_mask", block_mask_uncompiled)

    def uncompiled(*args: object, training: bool = False, **kwargs: object) -> object:
        del training  # selects a compile mode only
        return flex_attention.flex_attention(*args, **kwargs)

    monkeypatch.setattr(hf_flex, "compile_friendly_flex_attention", uncompiled)


FLEX_CASES = [("gemma2-9b", False), ("gemma2-9b", True), ("gpt-oss", False)]


@pytest.mark.usefixtures("flex_uncompiled")
@pytest.mark.parametrize(("family", "use_cache"), FLEX_CASES)
def test_flex_verdicts_and_blocks_match_the_real_forward(family: str, use_cache: bool) -> None:
    case = scenario("flex_attention", use_cache)
    with captured_masks("flex_attention") as built, flex_without_sinks():
        truth = leaks(family, "flex_attention", case)
    report = probe(family, case)
    assert truth is bool(report.cross_document_layers())
    assert truth is (use_cache or family == "gpt-oss")  # as under eager
    real = {_block_counts(mask) for mask in built}
    probed = set()
    for layer in report.layers:
        blocks = layer.kernel.blocks
        assert blocks is not None
        probed.add((blocks.full, blocks.partial, blocks.nbytes))
    assert probed == real


def test_flex_blocks_of_a_longer_packed_row_match_torchs_blockmask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 640 tokens (5 x 5 blocks), documents and a window: the probe's block counts
    are those of the BlockMask transformers builds (uncompiled, same blocks)."""
    monkeypatch.setattr(masking_utils, "create_block_mask", block_mask_uncompiled)
    data = {**tiny_config("gemma2-9b"), "sliding_window": 64}
    documents = (150, 300, 190)
    config = transformers.AutoConfig.for_model(
        "gemma2", **{k: v for k, v in data.items() if k != "model_type"}
    )
    model = transformers.AutoModel.from_config(config, attn_implementation="flex_attention")
    model.eval()
    row = torch.cat([torch.arange(n) for n in documents])[None]
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def no_attention(_module: object, query: torch.Tensor, *_a: object, **_k: object) -> object:
        return query.transpose(1, 2), None  # only the masks are wanted: nothing to compile

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "flex_attention", no_attention)
    with captured_masks("flex_attention") as built, torch.no_grad():
        model(input_ids=torch.zeros((1, 640), dtype=torch.long), position_ids=row, use_cache=False)
    case = MaskScenario(
        seq_len=640,
        packing=Packing.POSITION_IDS,
        documents=documents,
        use_cache=False,
        training=False,
        attn_implementation="flex_attention",
    )
    report = probe_masks(data, case, dtype="float32")
    probed = {
        (layer.kernel.blocks.full, layer.kernel.blocks.partial, layer.kernel.blocks.nbytes)
        for layer in report.layers
        if layer.kernel.blocks is not None
    }
    assert probed == {_block_counts(mask) for mask in built}
    assert len(probed) == 2  # the sliding and the full layer differ


# -- FlashAttention: transformers' own flash forward with a reference kernel ----------


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    window: tuple[int, int],
    softcap: float,
    scale: float | None,
) -> torch.Tensor:
    """Attention over one sequence, ``(length, heads, dim)``, computed for real."""
    heads, kv_heads = q.shape[1], k.shape[1]
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * (scale or 1 / math.sqrt(q.shape[-1]))
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    length = q.shape[0]
    qi = torch.arange(length)[:, None]
    ki = torch.arange(length)[None, :]
    allowed = torch.ones((length, length), dtype=torch.bool)
    if causal:
        allowed &= ki <= qi
    if window[0] >= 0:
        allowed &= ki >= qi - window[0]
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


@contextmanager
def reference_flash() -> Iterator[list[tuple[int, ...] | None]]:
    """flash-attn 2's two entry points, computed for real; yields the cu_seqlens of each
    call (``None``: the plain kernel)."""
    seen: list[tuple[int, ...] | None] = []

    def flash_attn_func(
        q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
        softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
    ):  # fmt: skip
        seen.append(None)
        return torch.stack(
            [
                _attend(q[b], k[b], v[b], causal, window_size, softcap, softmax_scale)
                for b in range(q.shape[0])
            ]
        )

    def flash_attn_varlen_func(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
        softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
        alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None,
    ):  # fmt: skip
        bounds = [int(x) for x in cu_seqlens_q]
        seen.append(tuple(bounds))
        parts = [
            _attend(q[s:e], k[s:e], v[s:e], causal, window_size, softcap, softmax_scale)
            for s, e in itertools.pairwise(bounds)
        ]
        return torch.cat(parts)

    loaded = (
        (flash_attn_func, flash_attn_varlen_func, None, fa_utils._pad_input, fa_utils._unpad_input),
        (fa_utils._lazy_define_process_function(flash_attn_varlen_func), dict),
    )
    original = fa_utils.lazy_import_flash_attention
    fa_utils.lazy_import_flash_attention = lambda *a, **k: loaded
    try:
        yield seen
    finally:
        fa_utils.lazy_import_flash_attention = original


FLASH_CASES = [
    (family, batch, cache)
    for family in ("llama3-8b", "gemma2-9b", "gpt-oss")
    for batch in (1, 2)
    for cache in (False, True)
]


@pytest.mark.parametrize(("family", "batch", "use_cache"), FLASH_CASES)
def test_flash_verdicts_match_transformers_flash_path_with_a_reference_kernel(
    family: str, batch: int, use_cache: bool
) -> None:
    case = scenario("flash_attention_2", use_cache, batch=batch)
    with reference_flash() as seen:
        truth = leaks(family, "flash_attention_2", case)
    report = probe(family, case)
    assert truth is bool(report.cross_document_layers())
    # transformers reads packed position_ids for flash only in a batch of one row,
    # and (unlike eager, SDPA and flex) whether or not a cache is built.
    assert truth is (batch > 1)
    documents = {int(x) for x in np.cumsum((0, *DOCUMENTS))}
    for bounds in seen:
        assert (bounds is None) is (batch > 1)
        if bounds is not None:
            assert set(bounds) == documents  # varlen boundaries are the documents'
    for layer in report.layers:
        assert layer.kernel.predicted
        assert "not run: predicted" in layer.kernel.description
        assert ("varlen kernel over 3 sequences" in layer.kernel.description) is (batch == 1)


def test_gpt_oss_sinks_are_dropped_by_flash_attention_2_and_kept_by_flex() -> None:
    flash = probe("gpt-oss", scenario("flash_attention_2", False))
    assert all("attention sinks dropped" in x.kernel.description for x in flash.layers)
    flex = probe("gpt-oss", scenario("flex_attention", False))
    assert all("attention sinks" in x.kernel.description for x in flex.layers)
