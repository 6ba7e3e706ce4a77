"""predict_backend: hand-checked cases against torch's sdp_utils rules, properties, validation.

C++ references are to ``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp`` (at
pytorch/pytorch@001f694a, minus #191085, as the module docstring explains) and
``sdp_utils_cpp.h`` beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise.errors import InvalidInputError
from probewise.throughput import (
    AttentionDtype,
    BackendPrediction,
    BackendRuling,
    MaskKind,
    SdpaBackend,
    SdpaCall,
    SdpaEnvironment,
    predict_backend,
)

# Private: two shared rules are held to torch's CPU dispatcher, which runs just those checks.
from probewise.throughput.attention.sdpa import (
    DEFAULT_ENVIRONMENT,
    RULES_VERSION,
    _heads_reasons,
    _mask_shape_reasons,
)

FLASH = SdpaBackend.FLASH
EFFICIENT = SdpaBackend.EFFICIENT
CUDNN = SdpaBackend.CUDNN
MATH = SdpaBackend.MATH

CUDNN_FIRST = (CUDNN, FLASH, EFFICIENT, MATH)
DEFAULT_ORDER = (FLASH, EFFICIENT, MATH, CUDNN)

BASE: dict[str, object] = {
    "batch": 2,
    "query_heads": 32,
    "kv_heads": 8,
    "query_length": 512,
    "kv_length": 512,
    "head_dim": 128,
    "value_head_dim": 128,
    "dtype": "bf16",
    "mask": MaskKind.NONE,
    "mask_shape": None,
    "is_causal": True,
    "dropout": 0.0,
    "enable_gqa": True,
}
"""A Llama-style causal GQA call: bf16, 32 query heads over 8 kv heads, head dim 128."""

MHA: dict[str, object] = {"kv_heads": 32, "enable_gqa": False}
BOOL_MASK: dict[str, object] = {
    "mask": MaskKind.BOOLEAN,
    "mask_shape": (2, 1, 512, 512),
    "is_causal": False,
}

EFFICIENT_NO_GQA = "efficient: query_heads 32 != kv_heads 8 (no GQA support in this kernel)"


_new_call: Callable[..., SdpaCall] = SdpaCall
_new_environment: Callable[..., SdpaEnvironment] = SdpaEnvironment


def make_call(**overrides: object) -> SdpaCall:
    return _new_call(**{**BASE, **overrides})


@attrs.frozen(kw_only=True)
class Case:
    id: str
    overrides: Mapping[str, object]
    capability: tuple[int, int] = (9, 0)
    environment: SdpaEnvironment = DEFAULT_ENVIRONMENT
    backend: SdpaBackend
    order: tuple[SdpaBackend, ...]
    reasons: Mapping[SdpaBackend, tuple[str, ...]]
    """The reasons per backend; a backend not listed must be usable."""


CASES = [
    # check_prefer_cudnn_attention: sm90, cuDNN 9.20 > 9.15.0, CUDA 13 build -> the
    # priority order becomes cudnn, flash, efficient, math; cuDNN takes GQA
    # (check_batch_size_and_num_heads_dense<true, false>), so it wins over flash.
    Case(
        id="sm90-gqa-causal-cudnn-first",
        overrides={},
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # TORCH_CUDNN_SDPA_DEPRIORITIZED=1: Context's default order (flash, efficient,
    # math, cudnn); flash takes GQA via check_grouped_query_attention.
    Case(
        id="sm90-gqa-causal-deprioritized-flash",
        overrides={},
        environment=SdpaEnvironment(cudnn_deprioritized=True),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # check_prefer_cudnn_attention needs cuDNN > 9.15.0: with 9.10.2 the default order.
    Case(
        id="sm90-old-cudnn-flash",
        overrides={},
        environment=SdpaEnvironment(cudnn_version=91002),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # No cuDNN in the build: can_use_cudnn_attention's #if returns false first.
    Case(
        id="sm90-no-cudnn-build",
        overrides={},
        environment=SdpaEnvironment(cudnn_version=None),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,), CUDNN: ("cudnn: torch built without cuDNN",)},
    ),
    # check_prefer_cudnn_attention is for major 9 or 10 only: sm80 keeps the default.
    Case(
        id="sm80-gqa-causal-flash",
        overrides={},
        capability=(8, 0),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # check_for_attn_mask rules flash out; cuDNN takes the 4-D mask
    # (check_attn_mask_shape) and GQA.
    Case(
        id="sm90-gqa-bool-mask-cudnn",
        overrides=BOOL_MASK,
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={FLASH: ("flash: attn_mask is not None",), EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # sm80: flash out on the mask, efficient out on GQA (supports_gqa=false in 2.13),
    # and cuDNN comes after math in the default order: math.
    Case(
        id="sm80-gqa-bool-mask-math",
        overrides=BOOL_MASK,
        capability=(8, 0),
        backend=MATH,
        order=DEFAULT_ORDER,
        reasons={FLASH: ("flash: attn_mask is not None",), EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # Same with equal heads: the memory-efficient kernel takes the mask.
    Case(
        id="sm80-mha-bool-mask-efficient",
        overrides={**BOOL_MASK, **MHA},
        capability=(8, 0),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={FLASH: ("flash: attn_mask is not None",)},
    ),
    # check_attn_mask_shape accepts only 2-D and 4-D masks: a broadcastable 3-D
    # additive mask rules cuDNN out; efficient takes it.
    Case(
        id="sm90-mha-3d-additive-mask-efficient",
        overrides={
            **MHA,
            "mask": MaskKind.ADDITIVE,
            "mask_shape": (32, 512, 512),
            "is_causal": False,
        },
        backend=EFFICIENT,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: attn_mask is 3-D (only 2-D and 4-D masks are accepted)",),
            FLASH: ("flash: attn_mask is not None",),
        },
    ),
    # check_head_dim_size_flash: <= 256; check_cudnn_tensor_shapes: <= 128 with cuDNN
    # 9.20 (d=256 needs > 9.22); efficient out on GQA: math.
    Case(
        id="sm90-gqa-head-dim-512-math",
        overrides={"head_dim": 512, "value_head_dim": 512},
        backend=MATH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: head_dim 512 > 128", "cudnn: value head_dim 512 > 128"),
            FLASH: ("flash: head_dim 512 > 256",),
            EFFICIENT: (EFFICIENT_NO_GQA,),
        },
    ),
    # check_head_dim_size_mem_efficient has no upper limit on CUDA, only alignment.
    Case(
        id="sm90-mha-head-dim-512-efficient",
        overrides={**MHA, "head_dim": 512, "value_head_dim": 512},
        backend=EFFICIENT,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: head_dim 512 > 128", "cudnn: value head_dim 512 > 128"),
            FLASH: ("flash: head_dim 512 > 256",),
        },
    ),
    # check_dtypes_flash_attention / check_dtypes_low_precision: fp16 and bf16 only.
    Case(
        id="sm90-mha-fp32-efficient",
        overrides={**MHA, "dtype": "fp32"},
        backend=EFFICIENT,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: dtype float32 not in (float16, bfloat16)",),
            FLASH: ("flash: dtype float32 not in (float16, bfloat16)",),
        },
    ),
    # float64: no fused kernel takes it (efficient: fp16/fp32/bf16 from sm80).
    Case(
        id="sm90-mha-fp64-math",
        overrides={**MHA, "dtype": "double"},
        backend=MATH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: dtype float64 not in (float16, bfloat16)",),
            FLASH: ("flash: dtype float64 not in (float16, bfloat16)",),
            EFFICIENT: ("efficient: dtype float64 not in (float16, float32, bfloat16)",),
        },
    ),
    # check_flash_attention_hardware_support [sm80, sm121] and
    # check_cudnn_hardware_support [sm80, sm121]; efficient runs from sm50.
    Case(
        id="sm70-mha-fp16-efficient",
        overrides={**MHA, "dtype": "fp16"},
        capability=(7, 0),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: ("flash: sm70 outside [sm80, sm121]",),
            CUDNN: ("cudnn: sm70 outside [sm80, sm121]",),
        },
    ),
    # Below sm80 efficient takes fp16/fp32 only and flash/cuDNN fp16 only: bf16 -> math.
    Case(
        id="sm75-mha-bf16-math",
        overrides=MHA,
        capability=(7, 5),
        backend=MATH,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: ("flash: sm75 outside [sm80, sm121]", "flash: dtype bfloat16 not in (float16)"),
            EFFICIENT: ("efficient: dtype bfloat16 not in (float16, float32)",),
            CUDNN: ("cudnn: dtype bfloat16 not in (float16)", "cudnn: sm75 outside [sm80, sm121]"),
        },
    ),
    # check_flash_causal_non_square_seqlens: decode with is_causal and q_len != kv_len.
    Case(
        id="sm80-mha-causal-decode-efficient",
        overrides={**MHA, "query_length": 1},
        capability=(8, 0),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={FLASH: ("flash: is_causal with query_length 1 != kv_length 512",)},
    ),
    # cuDNN has no non-square causal rule and takes query_length 1 without dropout.
    Case(
        id="sm90-mha-causal-decode-cudnn",
        overrides={**MHA, "query_length": 1},
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={FLASH: ("flash: is_causal with query_length 1 != kv_length 512",)},
    ),
    # check_cudnn_dropout: 0.1 is not a multiple of 1/16; flash takes dropout.
    Case(
        id="sm90-mha-dropout-0.1-flash",
        overrides={**MHA, "dropout": 0.1},
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={CUDNN: ("cudnn: dropout 0.1 not a multiple of 1/16",)},
    ),
    Case(
        id="sm90-mha-dropout-0.125-cudnn",
        overrides={**MHA, "dropout": 0.125},
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={},
    ),
    # can_use_cudnn_attention: no dropout with cuDNN 9.11-9.13 (and 9.12 is not
    # preferred either: <= 9.15.0).
    Case(
        id="sm90-mha-dropout-cudnn-9.12",
        overrides={**MHA, "dropout": 0.125},
        environment=SdpaEnvironment(cudnn_version=91200),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={CUDNN: ("cudnn: dropout unsupported with cuDNN 91200 (9.11-9.13)",)},
    ),
    # check_cudnn_tensor_shapes: query_length 1 with dropout.
    Case(
        id="sm90-mha-decode-dropout",
        overrides={**MHA, "query_length": 1, "is_causal": False, "dropout": 0.125},
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={CUDNN: ("cudnn: query_length 1 with dropout",)},
    ),
    # check_cudnn_tensor_shapes: key/value sequence length 1.
    Case(
        id="sm90-mha-kv-length-1",
        overrides={**MHA, "query_length": 1, "kv_length": 1},
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={CUDNN: ("cudnn: kv_length 1 (cuDNN needs kv_length > 1)",)},
    ),
    # Implicit MQA (kv_heads 1, no enable_gqa): 2.13's check_batch_size_and_num_heads_dense
    # has no supports_mqa, so every fused kernel needs equal heads (math broadcasts).
    Case(
        id="sm90-implicit-mqa-math",
        overrides={"kv_heads": 1, "enable_gqa": False},
        backend=MATH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: query_heads 32 != kv_heads 1 without enable_gqa",),
            FLASH: ("flash: query_heads 32 != kv_heads 1 without enable_gqa",),
            EFFICIENT: ("efficient: query_heads 32 != kv_heads 1 without enable_gqa",),
        },
    ),
    # check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120: training
    # with head_dim in (192, 224] on sm86.
    Case(
        id="sm86-backward-head-dim-200",
        overrides={**MHA, "head_dim": 200, "value_head_dim": 200, "requires_grad": True},
        capability=(8, 6),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: ("flash: backward with head_dim 200 in (192, 224] unsupported on sm86",),
            CUDNN: ("cudnn: head_dim 200 > 128", "cudnn: value head_dim 200 > 128"),
        },
    ),
    # ... forward only: no such limit.
    Case(
        id="sm86-forward-head-dim-200",
        overrides={**MHA, "head_dim": 200, "value_head_dim": 200},
        capability=(8, 6),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={CUDNN: ("cudnn: head_dim 200 > 128", "cudnn: value head_dim 200 > 128")},
    ),
    # ... and head_dim in (224, 256] only with dropout, on sm120 as on sm86-89.
    Case(
        id="sm120-backward-head-dim-256-dropout",
        overrides={
            **MHA,
            "head_dim": 256,
            "value_head_dim": 256,
            "requires_grad": True,
            "dropout": 0.1,
        },
        capability=(12, 0),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: (
                "flash: backward with head_dim 256 in (224, 256] with dropout > 0 "
                "unsupported on sm120",
            ),
            CUDNN: (
                "cudnn: dropout 0.1 not a multiple of 1/16",
                "cudnn: head_dim 256 > 128",
                "cudnn: value head_dim 256 > 128",
            ),
        },
    ),
    Case(
        id="sm120-backward-head-dim-256-no-dropout",
        overrides={**MHA, "head_dim": 256, "value_head_dim": 256, "requires_grad": True},
        capability=(12, 0),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={CUDNN: ("cudnn: head_dim 256 > 128", "cudnn: value head_dim 256 > 128")},
    ),
    # sm90 has no backward head-dim limit for flash.
    Case(
        id="sm90-backward-head-dim-200-deprioritized",
        overrides={**MHA, "head_dim": 200, "value_head_dim": 200, "requires_grad": True},
        environment=SdpaEnvironment(cudnn_deprioritized=True),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={CUDNN: ("cudnn: head_dim 200 > 128", "cudnn: value head_dim 200 > 128")},
    ),
    # check_cudnn_tensor_shapes: with cuDNN > 9.22 and frontend >= 1.24, d <= 256 on sm90.
    Case(
        id="sm90-cudnn-9.23-head-dim-256",
        overrides={"head_dim": 256, "value_head_dim": 256},
        environment=SdpaEnvironment(cudnn_version=92300),
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # check_cudnn_d256_bprop_head_dim: backward only for <=128, 192/128 or 256/256.
    Case(
        id="sm90-cudnn-9.23-backward-256-over-128",
        overrides={"head_dim": 256, "value_head_dim": 128, "requires_grad": True},
        environment=SdpaEnvironment(cudnn_version=92300),
        backend=MATH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: (
                "cudnn: backward with head_dim 256 / value head_dim 128 unsupported "
                "(only <= 128, 192/128 or 256/256)",
            ),
            FLASH: ("flash: value head_dim 128 != query/key head_dim 256",),
            EFFICIENT: (EFFICIENT_NO_GQA,),
        },
    ),
    # Without kCuDNNFrontendSupportsD256 the limit stays 128.
    Case(
        id="sm90-cudnn-9.23-old-frontend",
        overrides={"head_dim": 256, "value_head_dim": 256},
        environment=SdpaEnvironment(cudnn_version=92300, cudnn_frontend_supports_d256=False),
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: head_dim 256 > 128", "cudnn: value head_dim 256 > 128"),
            EFFICIENT: (EFFICIENT_NO_GQA,),
        },
    ),
    # is_unsupported_sm107: sm107 with cuDNN <= 9.25 gets no d=256.
    Case(
        id="sm107-cudnn-9.23-head-dim-256",
        overrides={"head_dim": 256, "value_head_dim": 256},
        capability=(10, 7),
        environment=SdpaEnvironment(cudnn_version=92300),
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={
            CUDNN: ("cudnn: head_dim 256 > 128", "cudnn: value head_dim 256 > 128"),
            EFFICIENT: (EFFICIENT_NO_GQA,),
        },
    ),
    # check_cudnn_tensor_shapes: the MLA shape d_qk 192 / d_v 128 on sm10x with
    # cuDNN >= 9.11 (limit 192); flash needs equal head dims.
    Case(
        id="sm100-mla-192-128-cudnn",
        overrides={"head_dim": 192, "value_head_dim": 128},
        capability=(10, 0),
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={
            FLASH: ("flash: value head_dim 128 != query/key head_dim 192",),
            EFFICIENT: (EFFICIENT_NO_GQA,),
        },
    ),
    # check_prefer_cudnn_attention on CUDA < 13 needs minor 0 or 3: sm101 keeps the
    # default order on a CUDA 12.9 build ...
    Case(
        id="sm101-cuda-12.9-default-order",
        overrides={},
        capability=(10, 1),
        environment=SdpaEnvironment(cuda_version=(12, 9)),
        backend=FLASH,
        order=DEFAULT_ORDER,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # ... but not on CUDA 13.
    Case(
        id="sm101-cuda-13-cudnn-first",
        overrides={},
        capability=(10, 1),
        backend=CUDNN,
        order=CUDNN_FIRST,
        reasons={EFFICIENT: (EFFICIENT_NO_GQA,)},
    ),
    # check_head_dim_size_mem_efficient: bf16 needs multiples of 8 (minimum_gemm_alignment);
    # cuDNN needs multiples of 8 too.
    Case(
        id="sm80-mha-mask-head-dim-100-bf16",
        overrides={**MHA, **BOOL_MASK, "head_dim": 100, "value_head_dim": 100},
        capability=(8, 0),
        backend=MATH,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: ("flash: attn_mask is not None",),
            EFFICIENT: (
                "efficient: head_dim 100 not a multiple of 8",
                "efficient: value head_dim 100 not a multiple of 8",
            ),
            CUDNN: (
                "cudnn: head_dim 100 not a multiple of 8",
                "cudnn: value head_dim 100 not a multiple of 8",
            ),
        },
    ),
    # ... fp32 needs multiples of 4 only.
    Case(
        id="sm80-mha-mask-head-dim-100-fp32",
        overrides={**MHA, **BOOL_MASK, "head_dim": 100, "value_head_dim": 100, "dtype": "fp32"},
        capability=(8, 0),
        backend=EFFICIENT,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: (
                "flash: attn_mask is not None",
                "flash: dtype float32 not in (float16, bfloat16)",
            ),
            CUDNN: (
                "cudnn: dtype float32 not in (float16, bfloat16)",
                "cudnn: head_dim 100 not a multiple of 8",
                "cudnn: value head_dim 100 not a multiple of 8",
            ),
        },
    ),
    # check_cudnn_tensor_shapes: batch <= 65535.
    Case(
        id="sm90-mha-batch-70000",
        overrides={**MHA, "batch": 70000, "query_length": 16, "kv_length": 16},
        backend=FLASH,
        order=CUDNN_FIRST,
        reasons={CUDNN: ("cudnn: batch 70000 > 65535",)},
    ),
    # Past sm121 (a hypothetical sm130) no fused kernel's hardware range holds.
    Case(
        id="sm130-math",
        overrides=MHA,
        capability=(13, 0),
        backend=MATH,
        order=DEFAULT_ORDER,
        reasons={
            FLASH: ("flash: sm130 outside [sm80, sm121]",),
            EFFICIENT: ("efficient: sm130 outside [sm50, sm121]",),
            CUDNN: ("cudnn: sm130 outside [sm80, sm121]",),
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hand_checked_case(case: Case) -> None:
    prediction = predict_backend(
        make_call(**case.overrides), capability=case.capability, environment=case.environment
    )
    assert prediction.backend is case.backend
    assert tuple(ruling.backend for ruling in prediction.rulings) == case.order
    got = {ruling.backend: ruling.reasons for ruling in prediction.rulings}
    want = {backend: case.reasons.get(backend, ()) for backend in SdpaBackend}
    assert got == want
    for ruling in prediction.rulings:
        assert ruling.usable is not bool(case.reasons.get(ruling.backend))
    assert prediction.capability == case.capability
    assert prediction.environment == case.environment
    assert prediction.fast is (case.backend in (FLASH, CUDNN))


@pytest.mark.parametrize(
    ("backend", "head_dim", "capability", "environment", "reasons"),
    [
        # check_head_dim_size_flash: <= 256 inclusive.
        (FLASH, 256, (9, 0), DEFAULT_ENVIRONMENT, ()),
        (FLASH, 264, (9, 0), DEFAULT_ENVIRONMENT, ("flash: head_dim 264 > 256",)),
        (FLASH, 257, (9, 0), DEFAULT_ENVIRONMENT, ("flash: head_dim 257 > 256",)),
        # check_cudnn_tensor_shapes: <= 128 with cuDNN 9.20, <= 256 with 9.23 (> 9.22).
        (CUDNN, 128, (9, 0), DEFAULT_ENVIRONMENT, ()),
        (
            CUDNN,
            136,
            (9, 0),
            DEFAULT_ENVIRONMENT,
            ("cudnn: head_dim 136 > 128", "cudnn: value head_dim 136 > 128"),
        ),
        (CUDNN, 256, (9, 0), SdpaEnvironment(cudnn_version=92300), ()),
        (
            CUDNN,
            256,
            (9, 0),
            SdpaEnvironment(cudnn_version=92200),
            ("cudnn: head_dim 256 > 128", "cudnn: value head_dim 256 > 128"),
        ),
        (
            CUDNN,
            264,
            (9, 0),
            SdpaEnvironment(cudnn_version=92300),
            ("cudnn: head_dim 264 > 256", "cudnn: value head_dim 264 > 256"),
        ),
        # d=256 is for sm90 exactly and sm10x: not sm89 or sm120.
        (
            CUDNN,
            256,
            (12, 0),
            SdpaEnvironment(cudnn_version=92300),
            ("cudnn: head_dim 256 > 128", "cudnn: value head_dim 256 > 128"),
        ),
        # minimum_gemm_alignment: 8 for half types from sm70, 4 for fp32 from sm80.
        (EFFICIENT, 8, (8, 0), DEFAULT_ENVIRONMENT, ()),
        (
            EFFICIENT,
            4,
            (8, 0),
            DEFAULT_ENVIRONMENT,
            (
                "efficient: head_dim 4 not a multiple of 8",
                "efficient: value head_dim 4 not a multiple of 8",
            ),
        ),
    ],
)
def test_head_dim_limits(
    backend: SdpaBackend,
    head_dim: int,
    capability: tuple[int, int],
    environment: SdpaEnvironment,
    reasons: tuple[str, ...],
) -> None:
    call = make_call(**MHA, head_dim=head_dim, value_head_dim=head_dim, is_causal=False)
    prediction = predict_backend(call, capability=capability, environment=environment)
    assert prediction.reasons_lost(backend) == reasons


@pytest.mark.parametrize(
    ("dtype", "capability", "alignment"),
    [
        # minimum_gemm_alignment: tensor cores from sm80 (any dtype) or sm70 (half only);
        # 4 elements from sm80, else 1; with tensor cores at least 128 bits.
        ("fp32", (8, 0), 4),
        ("fp32", (7, 5), 1),
        ("fp16", (7, 5), 8),
        ("fp32", (6, 1), 1),
        ("fp16", (6, 1), 1),
        ("fp64", (9, 0), 4),
    ],
)
def test_efficient_alignment(dtype: str, capability: tuple[int, int], alignment: int) -> None:
    aligned = make_call(**MHA, dtype=dtype, head_dim=alignment * 3, value_head_dim=alignment)
    assert not any(
        "multiple" in reason
        for reason in predict_backend(aligned, capability=capability).reasons_lost(EFFICIENT)
    )
    if alignment > 1:
        odd = make_call(**MHA, dtype=dtype, head_dim=alignment + 2, value_head_dim=alignment)
        assert predict_backend(odd, capability=capability).reasons_lost(EFFICIENT)[0] == (
            f"efficient: head_dim {alignment + 2} not a multiple of {alignment}"
        )


@pytest.mark.parametrize(
    ("capability", "limited"),
    [
        ((8, 0), False),
        ((8, 6), True),
        ((8, 7), True),
        ((8, 9), True),
        ((9, 0), False),
        ((10, 0), False),
        ((12, 0), True),
        ((12, 1), True),
    ],
)
def test_flash_backward_head_dim_window_by_arch(capability: tuple[int, int], limited: bool) -> None:
    # check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120.
    call = make_call(**MHA, head_dim=224, value_head_dim=224, requires_grad=True)
    reasons = predict_backend(call, capability=capability).reasons_lost(FLASH)
    sm = f"sm{capability[0]}{capability[1]}"
    want = (f"flash: backward with head_dim 224 in (192, 224] unsupported on {sm}",)
    assert reasons == (want if limited else ())
    assert (
        predict_backend(attrs.evolve(call, requires_grad=False), capability=capability)
        .ruling(FLASH)
        .usable
    )


def test_cudnn_mla_shape_needs_cudnn_9_11() -> None:
    # check_cudnn_tensor_shapes: the 192/128 limit is for cuDNN >= 9.11.0 only.
    call = make_call(head_dim=192, value_head_dim=128)
    old = predict_backend(
        call, capability=(10, 0), environment=SdpaEnvironment(cudnn_version=91002)
    )
    assert old.reasons_lost(CUDNN) == ("cudnn: head_dim 192 > 128",)
    new = predict_backend(
        call, capability=(10, 0), environment=SdpaEnvironment(cudnn_version=91100)
    )
    assert new.ruling(CUDNN).usable
    # ... and for exactly 192 / 128.
    assert predict_backend(make_call(head_dim=160, value_head_dim=128), capability=(10, 0)).ruling(
        CUDNN
    ).reasons == ("cudnn: head_dim 160 > 128",)


def test_reasons_lost_defaults_to_flash() -> None:
    prediction = predict_backend(make_call(**BOOL_MASK), capability=(8, 0))
    assert prediction.reasons_lost() == ("flash: attn_mask is not None",)
    assert prediction.reasons_lost(EFFICIENT) == (EFFICIENT_NO_GQA,)
    assert prediction.reasons_lost(MATH) == ()
    assert prediction.ruling(CUDNN).usable
    assert not prediction.fast


def test_rules_version_names_the_release_and_the_source() -> None:
    prediction = predict_backend(make_call())
    assert prediction.rules_version == RULES_VERSION
    assert RULES_VERSION.startswith("2.13")
    assert "001f694a" in RULES_VERSION


def test_capability_may_be_a_list() -> None:
    assert predict_backend(make_call(), capability=[8, 0]).capability == (8, 0)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Properties


@st.composite
def calls(draw: st.DrawFn) -> SdpaCall:
    kv_heads = draw(st.integers(1, 8))
    enable_gqa = draw(st.booleans())
    if enable_gqa:
        query_heads = kv_heads * draw(st.integers(1, 8))
    else:
        query_heads = draw(st.sampled_from([kv_heads, kv_heads * draw(st.integers(1, 8))]))
        kv_heads = kv_heads if query_heads == kv_heads else 1
    batch = draw(st.integers(1, 4))
    query_length = draw(st.sampled_from([1, 2, 7, 64, 128, 513]))
    kv_length = draw(st.sampled_from([query_length, 1, 3, 64, 1000]))
    head_dims = [8, 24, 60, 64, 96, 100, 128, 160, 192, 200, 256, 320, 512]
    head_dim = draw(st.sampled_from(head_dims))
    value_head_dim = draw(st.sampled_from([head_dim, *head_dims]))
    mask = draw(st.sampled_from(list(MaskKind)))
    mask_shape: tuple[int, ...] | None = None
    if mask is not MaskKind.NONE:
        full = (batch, query_heads, query_length, kv_length)
        ndim = draw(st.integers(2, 4))
        mask_shape = tuple(draw(st.sampled_from([size, 1])) for size in full[len(full) - ndim :])
    return SdpaCall(
        batch=batch,
        query_heads=query_heads,
        kv_heads=kv_heads,
        query_length=query_length,
        kv_length=kv_length,
        head_dim=head_dim,
        value_head_dim=value_head_dim,
        dtype=draw(st.sampled_from(list(AttentionDtype))),
        mask=mask,
        mask_shape=mask_shape,
        is_causal=draw(st.booleans()),
        dropout=draw(st.sampled_from([0.0, 0.0625, 0.1, 0.5])),
        enable_gqa=enable_gqa,
        requires_grad=draw(st.booleans()),
    )


CAPABILITIES = [(5, 0), (6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0)]
CAPABILITIES += [(10, 3), (10, 7), (12, 0), (12, 1), (13, 0)]
capabilities = st.sampled_from(CAPABILITIES)
environments = st.builds(
    SdpaEnvironment,
    cudnn_version=st.sampled_from([None, 8907, 90100, 91002, 91200, 91501, 92000, 92300, 92600]),
    cuda_version=st.sampled_from([(12, 6), (12, 9), (13, 0)]),
    cudnn_frontend_supports_d256=st.booleans(),
    cudnn_deprioritized=st.booleans(),
)


@settings(max_examples=400)
@given(calls(), capabilities, environments)
def test_prediction_invariants(
    call: SdpaCall, capability: tuple[int, int], environment: SdpaEnvironment
) -> None:
    prediction = predict_backend(call, capability=capability, environment=environment)
    order = [ruling.backend for ruling in prediction.rulings]
    assert sorted(order, key=lambda b: b.value) == sorted(SdpaBackend, key=lambda b: b.value)
    assert prediction.ruling(MATH).usable
    assert prediction.ruling(MATH).reasons == ()
    first_usable = next(ruling.backend for ruling in prediction.rulings if ruling.usable)
    assert prediction.backend is first_usable
    for ruling in prediction.rulings:
        assert (ruling.reasons == ()) is ruling.usable
        for reason in ruling.reasons:
            assert reason.startswith(f"{ruling.backend.value}: ")
        assert prediction.reasons_lost(ruling.backend) == ruling.reasons
    assert prediction.fast is (prediction.backend in (FLASH, CUDNN))
    # Deterministic: the same inputs give an equal prediction.
    assert predict_backend(call, capability=capability, environment=environment) == prediction
    # cuDNN is ahead of math exactly when check_prefer_cudnn_attention moves it first.
    assert (order[0] is CUDNN) is (order.index(CUDNN) < order.index(MATH))


@settings(max_examples=300)
@given(calls(), capabilities, environments)
def test_flash_usable_only_within_its_published_limits(
    call: SdpaCall, capability: tuple[int, int], environment: SdpaEnvironment
) -> None:
    flash = predict_backend(call, capability=capability, environment=environment).ruling(FLASH)
    if flash.usable:
        assert call.mask is MaskKind.NONE
        assert call.head_dim == call.value_head_dim <= 256
        assert call.dtype in (AttentionDtype.FLOAT16, AttentionDtype.BFLOAT16)
        assert (8, 0) <= capability <= (12, 1)
        assert not call.is_causal or call.query_length == call.kv_length
    if call.mask is not MaskKind.NONE:
        assert "flash: attn_mask is not None" in flash.reasons


@settings(max_examples=200)
@given(calls(), capabilities)
def test_deprioritizing_cudnn_only_reorders(call: SdpaCall, capability: tuple[int, int]) -> None:
    """The environment variable changes the order, never a ruling."""
    preferred = predict_backend(call, capability=capability)
    deprioritized = predict_backend(
        call, capability=capability, environment=SdpaEnvironment(cudnn_deprioritized=True)
    )
    assert set(preferred.rulings) == set(deprioritized.rulings)
    assert deprioritized.rulings[-1].backend is CUDNN


# ---------------------------------------------------------------------------------------
# The shared rules against torch's CPU dispatcher (sdp_utils_cpp.h is compiled into it)


@st.composite
def small_calls(draw: st.DrawFn) -> SdpaCall:
    kv_heads = draw(st.integers(1, 3))
    query_heads = kv_heads * draw(st.integers(1, 3))
    enable_gqa = draw(st.booleans())
    if not enable_gqa and query_heads != kv_heads:
        kv_heads = draw(st.sampled_from([1, query_heads]))
    batch = draw(st.integers(1, 2))
    query_length = draw(st.integers(1, 4))
    kv_length = draw(st.integers(1, 4))
    mask = draw(st.sampled_from([MaskKind.NONE, MaskKind.BOOLEAN]))
    mask_shape: tuple[int, ...] | None = None
    if mask is MaskKind.BOOLEAN:
        full = (batch, query_heads, query_length, kv_length)
        ndim = draw(st.integers(2, 4))
        mask_shape = tuple(draw(st.sampled_from([size, 1])) for size in full[len(full) - ndim :])
    return SdpaCall(
        batch=batch,
        query_heads=query_heads,
        kv_heads=kv_heads,
        query_length=query_length,
        kv_length=kv_length,
        head_dim=8,
        value_head_dim=8,
        dtype=AttentionDtype.FLOAT32,
        mask=mask,
        mask_shape=mask_shape,
        is_causal=draw(st.booleans()),
        dropout=0.0,
        enable_gqa=enable_gqa,
    )


@settings(max_examples=120)
@given(small_calls())
def test_shared_rules_agree_with_torch_cpu_dispatch(call: SdpaCall) -> None:
    """CPU flash (``use_flash_attention_cpp``) runs the same header checks.

    With fp32, no dropout and equal head dims, the 2.13 CPU dispatcher picks flash iff
    ``check_batch_size_and_num_heads_dense<supports_gqa=true>`` and
    ``check_attn_mask_shape`` pass: the two rules implemented here for cuDNN and
    flash (including 2.13's lack of implicit MQA and its refusal of 3-D masks).
    """
    torch = pytest.importorskip("torch")
    query = torch.zeros(call.batch, call.query_heads, call.query_length, call.head_dim)
    key = torch.zeros(call.batch, call.kv_heads, call.kv_length, call.head_dim)
    mask = None if call.mask_shape is None else torch.ones(call.mask_shape, dtype=torch.bool)
    choice = torch._fused_sdp_choice(
        query, key, key, attn_mask=mask, is_causal=call.is_causal, enable_gqa=call.enable_gqa
    )
    ours = _heads_reasons(FLASH, call, supports_gqa=True) + _mask_shape_reasons(CUDNN, call)
    flash_value = torch.nn.attention.SDPBackend.FLASH_ATTENTION.value
    math_value = torch.nn.attention.SDPBackend.MATH.value
    assert choice == (math_value if ours else flash_value)


# ---------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (AttentionDtype.BFLOAT16, AttentionDtype.BFLOAT16),
        ("bf16", AttentionDtype.BFLOAT16),
        ("bfloat16", AttentionDtype.BFLOAT16),
        ("torch.bfloat16", AttentionDtype.BFLOAT16),
        ("fp16", AttentionDtype.FLOAT16),
        ("half", AttentionDtype.FLOAT16),
        ("torch.float16", AttentionDtype.FLOAT16),
        ("fp32", AttentionDtype.FLOAT32),
        ("float", AttentionDtype.FLOAT32),
        ("float32", AttentionDtype.FLOAT32),
        (" Float32 ", AttentionDtype.FLOAT32),
        ("fp64", AttentionDtype.FLOAT64),
        ("double", AttentionDtype.FLOAT64),
        ("torch.float64", AttentionDtype.FLOAT64),
    ],
)
def test_dtype_spellings(name: AttentionDtype | str, expected: AttentionDtype) -> None:
    assert AttentionDtype.parse(name) is expected


@pytest.mark.parametrize("name", ["int8", "fp8", "", "torch.", 16])
def test_unknown_dtype_names_the_choices(name: object) -> None:
    with pytest.raises(InvalidInputError, match=r"dtype must be one of .*bf16.*fp32"):
        AttentionDtype.parse(name)  # type: ignore[arg-type]


def test_call_parses_its_dtype() -> None:
    assert make_call(dtype="torch.float16").dtype is AttentionDtype.FLOAT16


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"batch": 0}, "batch"),
        ({"batch": True}, "batch"),
        ({"batch": 2.0}, "batch"),
        ({"query_heads": -1}, "query_heads"),
        ({"kv_heads": 0}, "kv_heads"),
        ({"query_length": 0}, "query_length"),
        ({"kv_length": "512"}, "kv_length"),
        ({"head_dim": 0}, "head_dim"),
        ({"value_head_dim": 0}, "value_head_dim"),
        ({"dtype": "int8"}, "dtype"),
        ({"mask": "boolean", "mask_shape": (512, 512)}, "mask"),
        ({"mask_shape": (512, 512)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN}, "mask_shape"),
        ({"mask": MaskKind.ADDITIVE, "mask_shape": (512,)}, "mask_shape"),
        ({"mask": MaskKind.ADDITIVE, "mask_shape": (1, 2, 1, 512, 512)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN, "mask_shape": (2, 1, 511, 512)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN, "mask_shape": (3, 1, 512, 512)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN, "mask_shape": (512, 0)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN, "mask_shape": (512.0, 512)}, "mask_shape"),
        ({"mask": MaskKind.BOOLEAN, "mask_shape": "512"}, "mask_shape"),
        ({"is_causal": 1}, "is_causal"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"dropout": math.nan}, "dropout"),
        ({"dropout": "0.1"}, "dropout"),
        ({"enable_gqa": None}, "enable_gqa"),
        ({"requires_grad": "yes"}, "requires_grad"),
        ({"kv_heads": 5}, "kv_heads"),
        ({"kv_heads": 8, "enable_gqa": False}, "kv_heads"),
    ],
)
def test_bad_call_names_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError, match=field):
        make_call(**overrides)


def test_implicit_mqa_and_broadcast_masks_are_valid() -> None:
    call = make_call(
        kv_heads=1, enable_gqa=False, mask=MaskKind.ADDITIVE, mask_shape=[1, 1, 1, 512]
    )
    assert call.mask_shape == (1, 1, 1, 512)


@pytest.mark.parametrize(
    ("capability", "message"),
    [
        ((9,), "capability"),
        ((9, 0, 0), "capability"),
        (("9", "0"), "capability"),
        ((True, 0), "capability"),
        ((0, 0), "capability"),
        ((9, -1), "capability"),
        ("90", "capability"),
    ],
)
def test_bad_capability(capability: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        predict_backend(make_call(), capability=capability)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cudnn_version": 0}, "cudnn_version"),
        ({"cudnn_version": True}, "cudnn_version"),
        ({"cudnn_version": 9.2}, "cudnn_version"),
        ({"cuda_version": (13,)}, "cuda_version"),
        ({"cudnn_frontend_supports_d256": 1}, "cudnn_frontend_supports_d256"),
        ({"cudnn_deprioritized": "no"}, "cudnn_deprioritized"),
    ],
)
def test_bad_environment_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError, match=field):
        _new_environment(**kwargs)


def test_predict_backend_rejects_wrong_types() -> None:
    with pytest.raises(InvalidInputError, match="call"):
        predict_backend(BASE)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="environment"):
        predict_backend(make_call(), environment=(13, 0))  # type: ignore[arg-type]


def test_ruling_reasons_must_match_usable_and_backend() -> None:
    with pytest.raises(InvalidInputError, match="empty iff usable"):
        BackendRuling(backend=FLASH, usable=True, reasons=("flash: x",))
    with pytest.raises(InvalidInputError, match="empty iff usable"):
        BackendRuling(backend=FLASH, usable=False, reasons=())
    with pytest.raises(InvalidInputError, match="'flash: '"):
        BackendRuling(backend=FLASH, usable=False, reasons=("cudnn: x",))
    with pytest.raises(InvalidInputError, match="reasons"):
        BackendRuling(backend=FLASH, usable=False, reasons=["flash: x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="backend"):
        BackendRuling(backend="flash", usable=True, reasons=())  # type: ignore[arg-type]


def test_prediction_must_be_consistent() -> None:
    rulings = predict_backend(make_call()).rulings
    with pytest.raises(InvalidInputError, match="first usable"):
        BackendPrediction(
            backend=FLASH, rulings=rulings, capability=(9, 0), rules_version=RULES_VERSION
        )
    with pytest.raises(InvalidInputError, match="exactly once"):
        BackendPrediction(
            backend=CUDNN,
            rulings=(*rulings[:-1], rulings[0]),
            capability=(9, 0),
            rules_version=RULES_VERSION,
        )
    with pytest.raises(InvalidInputError, match="capability"):
        BackendPrediction(backend=CUDNN, rulings=rulings, capability=(9,), rules_version="x")
    ok = BackendPrediction(
        backend=CUDNN, rulings=rulings, capability=(9, 0), rules_version=RULES_VERSION
    )
    assert ok.environment is DEFAULT_ENVIRONMENT
