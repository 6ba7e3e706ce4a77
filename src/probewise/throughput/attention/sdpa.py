"""Which CUDA kernel ``scaled_dot_product_attention`` would pick, predicted on CPU.

A mask probe records each SDPA call a model makes (shapes, dtype, mask, flags) as an
:class:`SdpaCall`; :func:`predict_backend` says which of torch's CUDA backends (flash,
memory-efficient, cuDNN, math) that call would get on a GPU of a given compute
capability, and, for every backend, each rule that rules it out. No torch API answers
this without a GPU, so this module re-implements torch's published selection rules in
pure Python. It never imports torch.

The specification it implements (the torch sources read, at which commits, the
assumptions about what the probe cannot see, and how reasons are written) is
docs/reference/sdpa.md. The C++ function behind each rule is named in a comment beside it.
The values it rules on (the call, the environment, the prediction) are defined beneath
it, in ``_sdpa_types``, and named here too.
"""

from __future__ import annotations

import math
from typing import Final, assert_never

from probewise.errors import ArgumentTypeValueError
from probewise.throughput.attention._sdpa_types import (
    DEFAULT_ENVIRONMENT,
    FAST_BACKENDS,
    AttentionDtype,
    BackendPrediction,
    BackendRuling,
    MaskKind,
    SdpaBackend,
    SdpaCall,
    SdpaEnvironment,
    as_capability,
)

# The values are defined beneath (_sdpa_types) and named here too, where callers have
# always imported them.
__all__ = [
    "DEFAULT_ENVIRONMENT",
    "FAST_BACKENDS",
    "RULES_VERSION",
    "AttentionDtype",
    "BackendPrediction",
    "BackendRuling",
    "MaskKind",
    "SdpaBackend",
    "SdpaCall",
    "SdpaEnvironment",
    "predict_backend",
]

RULES_VERSION: Final = (
    "2.13.0 (pytorch/pytorch@cf30153c4c13; rules read from sdp_utils.cpp at "
    "pytorch/pytorch@001f694aef6f, without #191085's memory-efficient GQA and implicit MQA)"
)
"""The torch version whose selection rules :func:`predict_backend` implements."""


# ---------------------------------------------------------------------------------------
# The rules


def _sm(capability: tuple[int, int]) -> str:
    return f"sm{capability[0]}{capability[1]}"


def _in_sm_range(capability: tuple[int, int], low: tuple[int, int], high: tuple[int, int]) -> bool:
    # check_sm_version<lower, upper>: inclusive at both ends, (major, minor) order.
    return low <= capability <= high


def _dtype_reason(
    backend: SdpaBackend, dtype: AttentionDtype, allowed: tuple[AttentionDtype, ...]
) -> list[str]:
    # check_tensor_dtype (sdp_utils_cpp.h): query, key and value all of one allowed dtype.
    if dtype in allowed:
        return []
    names = ", ".join(d.value for d in allowed)
    return [f"{backend.value}: dtype {dtype.value} not in ({names})"]


def _heads_reasons(backend: SdpaBackend, call: SdpaCall, *, supports_gqa: bool) -> list[str]:
    """``check_batch_size_and_num_heads_dense<supports_gqa, ...>`` (sdp_utils_cpp.h).

    Batch sizes always agree (one :attr:`SdpaCall.batch`), key and value always have
    the same heads (so the ``requires_same_num_heads`` template argument makes no
    difference) and :class:`SdpaCall` makes ``kv_heads`` divide ``query_heads`` under
    ``enable_gqa``: what can fail is unequal heads where GQA is not taken.
    """
    name = backend.value
    if call.enable_gqa and supports_gqa:
        # check_grouped_query_attention: the key/value heads must divide the query
        # heads, which SdpaCall already guarantees under enable_gqa.
        return []
    if call.query_heads != call.kv_heads:
        # "For dense input, both fused kernels require query, key and value to have the
        # same num_heads."
        if call.enable_gqa:
            return [
                f"{name}: query_heads {call.query_heads} != kv_heads {call.kv_heads} "
                "(no GQA support in this kernel)"
            ]
        return [
            f"{name}: query_heads {call.query_heads} != kv_heads {call.kv_heads} without enable_gqa"
        ]
    return []


def _mask_shape_reasons(backend: SdpaBackend, call: SdpaCall) -> list[str]:
    """``check_attn_mask_shape`` (sdp_utils_cpp.h), used by cuDNN.

    The mask's last two dims must each match (query_length, kv_length) or be 1, and
    the mask must be 2-D, or 4-D with dims 0 and 1 each matching (batch, query_heads)
    or 1. :class:`SdpaCall` already guarantees every size matches or is 1, so only
    the dimension rule can fail: a 3-D mask is refused even though it broadcasts.
    (A mask requiring grad also fails; masks are assumed not to.)
    """
    shape = call.mask_shape
    if shape is None or len(shape) in (2, 4):
        return []
    return [f"{backend.value}: attn_mask is {len(shape)}-D (only 2-D and 4-D masks are accepted)"]


def _flash_reasons(call: SdpaCall, capability: tuple[int, int]) -> list[str]:
    """``can_use_flash_attention``'s constraints, in its order."""
    name = SdpaBackend.FLASH.value
    reasons: list[str] = []
    # check_runtime_disabled_flash, check_all_tensors_on_device, check_tensor_shapes:
    # pass by assumption (flag on, CUDA tensors, 4-D).
    # check_for_attn_mask: flash takes no mask at all.
    if call.mask is not MaskKind.NONE:
        reasons.append(f"{name}: attn_mask is not None")
    # check_head_dim_size_flash<false>: q, k, v last dims equal and <= 256 (CUDA build).
    if call.value_head_dim != call.head_dim:
        reasons.append(
            f"{name}: value head_dim {call.value_head_dim} != query/key head_dim {call.head_dim}"
        )
    if call.head_dim > 256:
        reasons.append(f"{name}: head_dim {call.head_dim} > 256")
    # check_flash_attention_hardware_support: sm80 <= capability <= sm121.
    if not _in_sm_range(capability, (8, 0), (12, 1)):
        reasons.append(f"{name}: {_sm(capability)} outside [sm80, sm121]")
    # check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120: training on
    # sm86-sm89 or sm120-sm121 supports head_dim <= 192, or > 224 without dropout.
    if call.requires_grad and (
        _in_sm_range(capability, (8, 6), (8, 9)) or _in_sm_range(capability, (12, 0), (12, 1))
    ):
        supported = call.head_dim <= 192 or (call.dropout == 0.0 and call.head_dim > 224)
        if not supported:
            window = "(192, 224]" if call.head_dim <= 224 else "(224, 256] with dropout > 0"
            reasons.append(
                f"{name}: backward with head_dim {call.head_dim} in {window} "
                f"unsupported on {_sm(capability)}"
            )
    # check_flash_causal_non_square_seqlens: is_causal needs seqlen_q == seqlen_k.
    if call.is_causal and call.query_length != call.kv_length:
        reasons.append(
            f"{name}: is_causal with query_length {call.query_length} != kv_length {call.kv_length}"
        )
    # check_dtypes_flash_attention -> check_dtypes_low_precision (FA3 off): fp16/bf16
    # from sm80, fp16 only below.
    allowed = (
        (AttentionDtype.FLOAT16, AttentionDtype.BFLOAT16)
        if capability[0] >= 8
        else (AttentionDtype.FLOAT16,)
    )
    reasons += _dtype_reason(SdpaBackend.FLASH, call.dtype, allowed)
    # Dense constraints: check_batch_size_and_num_heads_dense<true /*supports_gqa*/,
    # true /*requires_same_num_heads*/>; check_nonzero_sequence_lengths_dense and
    # check_last_dim_stride_equals_1_dense<true> pass by assumption.
    reasons += _heads_reasons(SdpaBackend.FLASH, call, supports_gqa=True)
    return reasons


def _gemm_alignment(dtype: AttentionDtype, capability: tuple[int, int]) -> int:
    """``minimum_gemm_alignment`` (with ``use_tensor_cores``), in elements."""
    major = capability[0]
    use_tensor_cores = major >= 8 or (major >= 7 and dtype.is_half)
    alignment = 4 if major >= 8 else 1
    bits_per_scalar = 16 if dtype.is_half else 32
    if use_tensor_cores:
        alignment = max(alignment, 128 // bits_per_scalar)
    return alignment


def _efficient_reasons(call: SdpaCall, capability: tuple[int, int]) -> list[str]:
    """``can_use_mem_efficient_attention``'s constraints (CUDA build), in its order."""
    name = SdpaBackend.EFFICIENT.value
    reasons: list[str] = []
    # check_runtime_disabled_mem_efficient, check_all_tensors_on_device: pass.
    # check_mem_efficient_hardware_support: sm50 <= capability <= sm121.
    if not _in_sm_range(capability, (5, 0), (12, 1)):
        reasons.append(f"{name}: {_sm(capability)} outside [sm50, sm121]")
    # check_tensor_shapes: pass (4-D).
    # check_head_dim_size_mem_efficient: q and k last dims equal (always here), q and v
    # last dims multiples of minimum_gemm_alignment.
    alignment = _gemm_alignment(call.dtype, capability)
    if call.head_dim % alignment != 0:
        reasons.append(f"{name}: head_dim {call.head_dim} not a multiple of {alignment}")
    if call.value_head_dim % alignment != 0:
        reasons.append(
            f"{name}: value head_dim {call.value_head_dim} not a multiple of {alignment}"
        )
    # check_data_ptr_alignment_mem_efficient: storage offsets assumed aligned.
    # Dense constraints: check_nonzero_sequence_lengths_dense and
    # check_last_dim_stride_equals_1_dense<false> pass; then
    # check_batch_size_and_num_heads_dense<false /*supports_gqa*/> in 2.13 (001f694a
    # has supports_gqa = true here, from #191085, after 2.13).
    reasons += _heads_reasons(SdpaBackend.EFFICIENT, call, supports_gqa=False)
    # check_tensor_dtype: fp16/fp32/bf16 from sm80, fp16/fp32 below.
    allowed = (
        (AttentionDtype.FLOAT16, AttentionDtype.FLOAT32, AttentionDtype.BFLOAT16)
        if capability[0] >= 8
        else (AttentionDtype.FLOAT16, AttentionDtype.FLOAT32)
    )
    reasons += _dtype_reason(SdpaBackend.EFFICIENT, call.dtype, allowed)
    return reasons


def _cudnn_head_dim_limit(
    call: SdpaCall, capability: tuple[int, int], environment: SdpaEnvironment, version: int
) -> tuple[int, bool]:
    """The head-dim limit in ``check_cudnn_tensor_shapes``, and whether d=256 is supported."""
    major, minor = capability
    is_sm90_or_sm10x = (major == 9 and minor == 0) or major == 10
    is_unsupported_sm107 = major == 10 and minor == 7 and version <= 92500
    supports_d256 = (
        is_sm90_or_sm10x
        and not is_unsupported_sm107
        and version > 92200
        and environment.cudnn_frontend_supports_d256
    )
    if supports_d256:
        return 256, True
    if (
        is_sm90_or_sm10x
        and version >= 91100
        and call.head_dim == 192
        and call.value_head_dim == 128
    ):
        return 192, False
    return 128, False


def _cudnn_reasons(
    call: SdpaCall, capability: tuple[int, int], environment: SdpaEnvironment
) -> list[str]:
    """``can_use_cudnn_attention``'s constraints, in its order."""
    name = SdpaBackend.CUDNN.value
    version = environment.cudnn_version
    # #if !AT_CUDNN_ENABLED() / CUDNN_VERSION < 90000: return false before any check.
    if version is None:
        return [f"{name}: torch built without cuDNN"]
    if version < 90000:
        return [f"{name}: cuDNN {version} < 9.0.0"]
    reasons: list[str] = []
    # Runtime cuDNN 9.11-9.13 cannot do dropout.
    if call.dropout > 0.0 and 91100 < version < 91400:
        reasons.append(f"{name}: dropout unsupported with cuDNN {version} (9.11-9.13)")
    # General constraints. check_runtime_disabled_cudnn, check_for_nested_inputs,
    # check_all_tensors_on_device, check_tensor_shapes, check_cudnn_deterministic: pass.
    # check_dtypes_low_precision: fp16/bf16 from sm80, fp16 below.
    allowed = (
        (AttentionDtype.FLOAT16, AttentionDtype.BFLOAT16)
        if capability[0] >= 8
        else (AttentionDtype.FLOAT16,)
    )
    reasons += _dtype_reason(SdpaBackend.CUDNN, call.dtype, allowed)
    # check_attn_mask_shape.
    reasons += _mask_shape_reasons(SdpaBackend.CUDNN, call)
    # check_cudnn_hardware_support: sm80 <= capability <= sm121.
    if not _in_sm_range(capability, (8, 0), (12, 1)):
        reasons.append(f"{name}: {_sm(capability)} outside [sm80, sm121]")
    # check_cudnn_dropout: dropout resolution is 1/16.
    if call.dropout * 16.0 != math.floor(call.dropout * 16.0):
        reasons.append(f"{name}: dropout {call.dropout} not a multiple of 1/16")
    # Dense constraints. check_nonzero_sequence_lengths_dense and
    # check_last_dim_stride_equals_1_dense<true>: pass.
    # check_batch_size_and_num_heads_dense<true /*supports_gqa*/, false
    # /*requires_same_num_heads*/>.
    reasons += _heads_reasons(SdpaBackend.CUDNN, call, supports_gqa=True)
    # check_cudnn_tensor_shapes.
    if call.batch > 65535:
        reasons.append(f"{name}: batch {call.batch} > 65535")
    if call.query_heads > 65535:
        reasons.append(f"{name}: query_heads {call.query_heads} > 65535")
    # (cuDNN < 8.9.3 / 8.9.6 / 9.0.0 branches: unreachable, version >= 9.0.0 here.)
    limit, supports_d256 = _cudnn_head_dim_limit(call, capability, environment, version)
    if call.head_dim > limit:
        reasons.append(f"{name}: head_dim {call.head_dim} > {limit}")
    if call.value_head_dim > limit:
        reasons.append(f"{name}: value head_dim {call.value_head_dim} > {limit}")
    if call.head_dim % 8 != 0:
        reasons.append(f"{name}: head_dim {call.head_dim} not a multiple of 8")
    if call.value_head_dim % 8 != 0:
        reasons.append(f"{name}: value head_dim {call.value_head_dim} not a multiple of 8")
    if call.kv_length == 1:
        reasons.append(f"{name}: kv_length 1 (cuDNN needs kv_length > 1)")
    if call.dropout != 0.0 and call.query_length == 1:
        reasons.append(f"{name}: query_length 1 with dropout")
    # check_cudnn_d256_bprop_head_dim: where d=256 is on, backward only for
    # d_qk, d_v <= 128, (192, 128) or (256, 256).
    if call.requires_grad and supports_d256:
        dims = (call.head_dim, call.value_head_dim)
        if not (max(dims) <= 128 or dims in ((192, 128), (256, 256))):
            reasons.append(
                f"{name}: backward with head_dim {call.head_dim} / value head_dim "
                f"{call.value_head_dim} unsupported (only <= 128, 192/128 or 256/256)"
            )
    return reasons


def _prefers_cudnn(capability: tuple[int, int], environment: SdpaEnvironment) -> bool:
    """``check_prefer_cudnn_attention``: whether ``priority_order`` moves cuDNN first."""
    version = environment.cudnn_version
    if environment.cudnn_deprioritized or version is None:
        return False
    major, minor = capability
    if environment.cuda_version < (13, 0):
        return version > 91500 and major in (9, 10) and minor in (0, 3)
    return version > 91500 and major in (9, 10)


def _priority_order(
    capability: tuple[int, int], environment: SdpaEnvironment
) -> tuple[SdpaBackend, ...]:
    """``priority_order``: cuDNN first where preferred, else the Context default."""
    if _prefers_cudnn(capability, environment):
        return (SdpaBackend.CUDNN, SdpaBackend.FLASH, SdpaBackend.EFFICIENT, SdpaBackend.MATH)
    # at::Context's sdp_priority_order (2.13 wheel: [1, 2, 0, 3, 4]); the trailing
    # overrideable backend is never reached because math always succeeds first.
    return (SdpaBackend.FLASH, SdpaBackend.EFFICIENT, SdpaBackend.MATH, SdpaBackend.CUDNN)


def _reasons(
    backend: SdpaBackend,
    call: SdpaCall,
    capability: tuple[int, int],
    environment: SdpaEnvironment,
) -> list[str]:
    match backend:
        case SdpaBackend.FLASH:
            return _flash_reasons(call, capability)
        case SdpaBackend.EFFICIENT:
            return _efficient_reasons(call, capability)
        case SdpaBackend.CUDNN:
            return _cudnn_reasons(call, capability, environment)
        case SdpaBackend.MATH:
            # select_sdp_backend: math is taken whenever userEnabledMathSDP() (default on).
            return []
        case _ as unreachable:
            assert_never(unreachable)


def predict_backend(
    call: SdpaCall,
    *,
    capability: tuple[int, int] = (9, 0),
    environment: SdpaEnvironment = DEFAULT_ENVIRONMENT,
) -> BackendPrediction:
    """The backend torch 2.13's ``select_sdp_backend`` would pick for ``call`` on CUDA.

    ``capability`` is the GPU's ``torch.cuda.get_device_capability()`` (default
    ``(9, 0)``, H100/H200). Every backend is ruled on, in the priority order torch
    would use on that GPU; the chosen backend is the first usable one (math always
    is). See the module docstring for the source and the assumptions.
    """
    if not isinstance(call, SdpaCall):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeValueError(f"call must be an SdpaCall, got {type(call).__name__}")
    if not isinstance(environment, SdpaEnvironment):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeValueError(
            f"environment must be an SdpaEnvironment, got {type(environment).__name__}"
        )
    capability = as_capability(capability)
    rulings: list[BackendRuling] = []
    for backend in _priority_order(capability, environment):
        reasons = _reasons(backend, call, capability, environment)
        rulings.append(BackendRuling(backend=backend, usable=not reasons, reasons=tuple(reasons)))
    chosen = next(ruling.backend for ruling in rulings if ruling.usable)
    return BackendPrediction(
        backend=chosen,
        rulings=tuple(rulings),
        capability=capability,
        rules_version=RULES_VERSION,
        environment=environment,
    )
