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
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Final, assert_never, final

import attrs

from probewise._validation import checked_type, positive, strict_int
from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.throughput._torch_dtype import TorchDtype, torch_dtype_name

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


@enum.unique
class SdpaBackend(enum.Enum):
    """A CUDA backend of ``scaled_dot_product_attention`` (``torch.nn.attention.SDPBackend``)."""

    FLASH = "flash"
    """FlashAttention-2 (``SDPBackend.FLASH_ATTENTION``)."""
    EFFICIENT = "efficient"
    """The memory-efficient (cutlass, xformers) kernel (``SDPBackend.EFFICIENT_ATTENTION``)."""
    CUDNN = "cudnn"
    """cuDNN's fused attention (``SDPBackend.CUDNN_ATTENTION``)."""
    MATH = "math"
    """The composite fallback that materialises the score matrix (``SDPBackend.MATH``)."""


FAST_BACKENDS: Final = (SdpaBackend.FLASH, SdpaBackend.CUDNN)
"""The backends :attr:`BackendPrediction.fast` counts as fast."""


@enum.unique
class AttentionDtype(enum.Enum):
    """The dtype of query, key and value (torch requires the three to agree)."""

    FLOAT32 = "float32"
    """``torch.float32``."""
    FLOAT16 = "float16"
    """``torch.float16``."""
    BFLOAT16 = "bfloat16"
    """``torch.bfloat16``."""
    FLOAT64 = "float64"
    """``torch.float64``."""

    @classmethod
    def parse(cls, name: AttentionDtype | str | TorchDtype) -> AttentionDtype:
        """The dtype named by ``name``: the enum itself, a torch dtype or a spelling.

        Accepted spellings (case and surrounding space ignored, an optional ``torch.``
        prefix allowed): ``bf16``/``bfloat16``, ``fp16``/``half``/``float16``,
        ``fp32``/``float``/``float32``, ``fp64``/``double``/``float64``; a torch dtype
        (``torch.bfloat16``) is recognised without importing torch (by its class,
        ``torch.dtype``). Anything else
        is an :class:`~probewise.errors.InvalidInputError` naming the choices.
        """
        if isinstance(name, AttentionDtype):
            return name
        text = name if isinstance(name, str) else torch_dtype_name(name)
        if text is not None:
            key = text.strip().lower().removeprefix("torch.")
            found = _DTYPE_SPELLINGS.get(key)
            if found is not None:
                return found
        choices = ", ".join(sorted(_DTYPE_SPELLINGS))
        raise InvalidInputError(f"dtype must be one of {choices} (or torch.<name>), got {name!r}")

    @property
    def is_half(self) -> bool:
        """16 bits wide (float16 or bfloat16): what torch's alignment rules call "half"."""
        return self in (AttentionDtype.FLOAT16, AttentionDtype.BFLOAT16)


_DTYPE_SPELLINGS: Final[dict[str, AttentionDtype]] = {
    "bf16": AttentionDtype.BFLOAT16,
    "bfloat16": AttentionDtype.BFLOAT16,
    "fp16": AttentionDtype.FLOAT16,
    "half": AttentionDtype.FLOAT16,
    "float16": AttentionDtype.FLOAT16,
    "fp32": AttentionDtype.FLOAT32,
    "float": AttentionDtype.FLOAT32,
    "float32": AttentionDtype.FLOAT32,
    "fp64": AttentionDtype.FLOAT64,
    "double": AttentionDtype.FLOAT64,
    "float64": AttentionDtype.FLOAT64,
}


@enum.unique
class MaskKind(enum.Enum):
    """The ``attn_mask`` an SDPA call was given.

    On CUDA builds boolean and additive masks choose the same backend (only ROCm's
    memory-efficient kernel looks at the mask's dtype); the kind is recorded for the
    reader.
    """

    NONE = "none"
    """``attn_mask=None``."""
    BOOLEAN = "boolean"
    """A boolean mask (``True`` takes part in attention)."""
    ADDITIVE = "additive"
    """A float mask of the query's dtype, added to the scores."""


# ---------------------------------------------------------------------------------------
# Field validators


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _strict_bool(_instance: object, attribute: attrs.Attribute[bool], value: bool) -> None:
    if type(value) is not bool:
        raise ArgumentTypeValueError(f"{attribute.name} must be a bool, got {type(value).__name__}")


def _dropout(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not _is_number(value):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a number, got {type(value).__name__}"
        )
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise InvalidInputError(f"{attribute.name} must be in [0, 1), got {value!r}")


def _mask_kind(_instance: object, attribute: attrs.Attribute[MaskKind], value: MaskKind) -> None:
    if type(value) is not MaskKind:
        choices = ", ".join(kind.value for kind in MaskKind)
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a MaskKind ({choices}), got {type(value).__name__}"
        )


def _to_dtype(value: AttentionDtype | str | TorchDtype) -> AttentionDtype:
    return AttentionDtype.parse(value)


def _to_shape(value: Sequence[int] | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not _is_sequence(value):
        raise ArgumentTypeValueError(
            f"mask_shape must be a sequence of ints or None, got {type(value).__name__}"
        )
    return tuple(value)


def _pair(name: str, value: Sequence[int]) -> tuple[int, int]:
    if not _is_sequence(value) or len(value) != 2 or not all(_is_int(part) for part in value):
        raise ArgumentTypeValueError(
            f"{name} must be a (major, minor) pair of ints, got {type(value).__name__}"
        )
    major, minor = value
    if major < 1 or minor < 0:
        raise InvalidInputError(f"{name} must have major >= 1 and minor >= 0, got {value!r}")
    return (major, minor)


def as_capability(value: Sequence[int]) -> tuple[int, int]:
    """A GPU's compute capability as a ``(major, minor)`` pair, checked."""
    return _pair("capability", value)


def _to_cuda_version(value: Sequence[int]) -> tuple[int, int]:
    return _pair("cuda_version", value)


def _optional_version(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is None:
        return
    if not _is_int(value):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be an int or None, got {type(value).__name__}"
        )
    if value < 1:
        raise InvalidInputError(f"{attribute.name} must be >= 1 or None, got {value}")


def _backend(
    _instance: object, attribute: attrs.Attribute[SdpaBackend], value: SdpaBackend
) -> None:
    if type(value) is not SdpaBackend:
        raise ArgumentTypeValueError(
            f"{attribute.name} must be an SdpaBackend, got {type(value).__name__}"
        )


def _string_tuple(
    _instance: object, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
) -> None:
    if type(value) is not tuple or not all(type(item) is str for item in value):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a tuple of str, got {type(value).__name__}"
        )


def _ruling_tuple(
    _instance: object,
    attribute: attrs.Attribute[tuple[BackendRuling, ...]],
    value: tuple[BackendRuling, ...],
) -> None:
    if type(value) is not tuple or not all(type(item) is BackendRuling for item in value):
        raise ArgumentTypeValueError(
            f"{attribute.name} must be a tuple of BackendRuling, got {type(value).__name__}"
        )


# ---------------------------------------------------------------------------------------
# The call


@final
@attrs.frozen(kw_only=True)
class SdpaCall:
    """The shapes and flags of one scaled_dot_product_attention call (what the backend choice depends on).

    Query is ``(batch, query_heads, query_length, head_dim)``, key
    ``(batch, kv_heads, kv_length, head_dim)`` and value
    ``(batch, kv_heads, kv_length, value_head_dim)``.

    Head counts follow what torch's math fallback accepts, so that every call is one
    torch can run: with ``enable_gqa`` the query heads must be a multiple of the
    key/value heads ("Number of heads in key and value must divide the number of
    heads in query"); without it they must be equal, or ``kv_heads`` must be 1 (an
    implicit multi-query broadcast, which math runs by broadcasting and which 2.13's
    fused kernels refuse). Any other mismatch makes torch raise a size-mismatch
    error, so it is an :class:`~probewise.errors.InvalidInputError` here.
    """

    batch: int = attrs.field(validator=[strict_int, positive])
    """Batch size (query dim 0; key and value must match)."""
    query_heads: int = attrs.field(validator=[strict_int, positive])
    """Query heads (query dim 1)."""
    kv_heads: int = attrs.field(validator=[strict_int, positive])
    """Key and value heads (dim 1 of both)."""
    query_length: int = attrs.field(validator=[strict_int, positive])
    """Query sequence length (query dim 2)."""
    kv_length: int = attrs.field(validator=[strict_int, positive])
    """Key/value sequence length (dim 2 of key and value)."""
    head_dim: int = attrs.field(validator=[strict_int, positive])
    """Query/key last dim."""
    value_head_dim: int = attrs.field(validator=[strict_int, positive])
    """Value last dim."""
    dtype: AttentionDtype = attrs.field(converter=_to_dtype)
    """Query, key and value dtype (a spelling such as ``"bf16"`` is parsed)."""
    mask: MaskKind = attrs.field(validator=_mask_kind)
    """The ``attn_mask`` passed, if any."""
    mask_shape: tuple[int, ...] | None = attrs.field(converter=_to_shape)
    """The mask's shape: ``None`` iff :attr:`mask` is ``NONE``; otherwise 2 to 4 dims
    broadcastable to ``(batch, query_heads, query_length, kv_length)``. (A 1-D mask is
    refused: torch's ``check_attn_mask_shape`` indexes its dim -2 and raises.)"""
    is_causal: bool = attrs.field(validator=_strict_bool)
    """``is_causal=True`` (torch 2.13 accepts it alongside a mask, too)."""
    dropout: float = attrs.field(validator=_dropout)
    """``dropout_p``, in ``[0, 1)``."""
    enable_gqa: bool = attrs.field(validator=_strict_bool)
    """``enable_gqa=True``."""
    requires_grad: bool = attrs.field(default=False, validator=_strict_bool)
    """A backward will follow (inputs require grad, grad mode on): some rules differ,
    e.g. flash's head-dim limits on sm86/89/120 and cuDNN's at head dim 256."""

    def __attrs_post_init__(self) -> None:
        if self.enable_gqa:
            if self.query_heads % self.kv_heads != 0:
                raise InvalidInputError(
                    f"kv_heads ({self.kv_heads}) must divide query_heads ({self.query_heads}) "
                    "when enable_gqa is set (torch raises otherwise)"
                )
        elif self.kv_heads not in (self.query_heads, 1):
            raise InvalidInputError(
                f"kv_heads ({self.kv_heads}) must equal query_heads ({self.query_heads}) or be 1 "
                "without enable_gqa (torch cannot broadcast other head counts)"
            )
        match self.mask:
            case MaskKind.NONE:
                if self.mask_shape is not None:
                    raise InvalidInputError(
                        f"mask_shape must be None when mask is NONE, got {self.mask_shape}"
                    )
            case MaskKind.BOOLEAN | MaskKind.ADDITIVE:
                self._check_mask_shape()
            case _ as unreachable:
                assert_never(unreachable)

    def _check_mask_shape(self) -> None:
        shape = self.mask_shape
        if shape is None:
            raise InvalidInputError(f"mask_shape is required when mask is {self.mask.value}")
        if not 2 <= len(shape) <= 4:
            raise InvalidInputError(
                f"mask_shape must have 2 to 4 dims, got {shape} ({len(shape)} dims)"
            )
        for size in shape:
            if not _is_int(size):
                raise InvalidInputError(f"mask_shape must hold ints, got {shape!r}")
            if size < 1:
                raise InvalidInputError(f"mask_shape sizes must be >= 1, got {shape}")
        target = (self.batch, self.query_heads, self.query_length, self.kv_length)
        for size, want in zip(reversed(shape), reversed(target), strict=False):
            if size not in (want, 1):
                raise InvalidInputError(
                    f"mask_shape {shape} is not broadcastable to (batch, query_heads, "
                    f"query_length, kv_length) = {target}"
                )


# ---------------------------------------------------------------------------------------
# What the shapes do not show

_CUDNN_9_20: Final[int | None] = 92000


@final
@attrs.frozen(kw_only=True)
class SdpaEnvironment:
    """The build and process settings the choice depends on that a call's shapes do not show.

    The defaults describe the PyPI torch 2.13.0 wheel (CUDA 13.0, cuDNN 9.20.0) with
    ``TORCH_CUDNN_SDPA_DEPRIORITIZED`` unset.
    """

    cudnn_version: int | None = attrs.field(default=_CUDNN_9_20, validator=_optional_version)
    """The cuDNN runtime version as torch reports it (``torch.backends.cudnn.version()``:
    ``major * 10000 + minor * 100 + patch`` for cuDNN 9, e.g. ``92000`` for 9.20.0), or
    ``None`` for a build without cuDNN (cuDNN attention is then never usable)."""
    cuda_version: tuple[int, int] = attrs.field(default=(13, 0), converter=_to_cuda_version)
    """The CUDA toolkit torch was built with (``torch.version.cuda``), as ``(major, minor)``."""
    cudnn_frontend_supports_d256: bool = attrs.field(default=True, validator=_strict_bool)
    """The bundled cuDNN frontend is at least 1.24 (``kCuDNNFrontendSupportsD256``)."""
    cudnn_deprioritized: bool = attrs.field(default=False, validator=_strict_bool)
    """``TORCH_CUDNN_SDPA_DEPRIORITIZED=1`` is set, so cuDNN is never moved to the front."""


DEFAULT_ENVIRONMENT: Final = SdpaEnvironment()
"""The official PyPI torch 2.13.0 wheel: CUDA 13.0, cuDNN 9.20.0, frontend >= 1.24."""


# ---------------------------------------------------------------------------------------
# The prediction


@final
@attrs.frozen(kw_only=True)
class BackendRuling:
    """Whether one backend could take the call, and if not, every rule that rules it out."""

    backend: SdpaBackend = attrs.field(validator=_backend)
    """The backend ruled on."""
    usable: bool = attrs.field(validator=_strict_bool)
    """Every rule of :attr:`backend` passes (torch's ``can_use_*`` would return ``True``)."""
    reasons: tuple[str, ...] = attrs.field(validator=_string_tuple)
    """Empty iff :attr:`usable`; otherwise each failing rule in torch's order, each
    starting with the backend's value, e.g. ``"flash: attn_mask is not None"``."""

    def __attrs_post_init__(self) -> None:
        if self.usable == bool(self.reasons):
            raise InvalidInputError(
                f"reasons must be empty iff usable (usable={self.usable}, reasons={self.reasons})"
            )
        prefix = f"{self.backend.value}: "
        for reason in self.reasons:
            if not reason.startswith(prefix):
                raise InvalidInputError(f"reasons must start with {prefix!r}, got {reason!r}")


@final
@attrs.frozen(kw_only=True)
class BackendPrediction:
    """The backend torch would pick for a call, and its ruling on each of the four."""

    backend: SdpaBackend = attrs.field(validator=_backend)
    """The one torch would pick: the first usable in :attr:`rulings`' order."""
    rulings: tuple[BackendRuling, ...] = attrs.field(validator=_ruling_tuple)
    """One per backend, in torch's priority order for this GPU and environment."""
    capability: tuple[int, int] = attrs.field(converter=as_capability)
    """The GPU's compute capability, ``(major, minor)``."""
    rules_version: str = attrs.field(validator=checked_type(str))
    """The torch version (and source commit) whose rules were applied."""
    environment: SdpaEnvironment = attrs.field(
        default=DEFAULT_ENVIRONMENT, validator=checked_type(SdpaEnvironment)
    )
    """The build and process settings assumed."""

    def __attrs_post_init__(self) -> None:
        order = [ruling.backend for ruling in self.rulings]
        if sorted(order, key=lambda b: b.value) != sorted(SdpaBackend, key=lambda b: b.value):
            raise InvalidInputError(f"rulings must hold each backend exactly once, got {order}")
        first = next((ruling.backend for ruling in self.rulings if ruling.usable), None)
        if first is not self.backend:
            raise InvalidInputError(
                f"backend must be the first usable ruling ({first}), got {self.backend}"
            )

    def ruling(self, backend: SdpaBackend) -> BackendRuling:
        """The ruling on ``backend``."""
        for ruling in self.rulings:
            if ruling.backend is backend:
                return ruling
        raise InvalidInputError(f"no ruling on {backend!r}")  # pragma: no cover - validated

    @property
    def fast(self) -> bool:
        """The call gets one of the two fused kernels torch ranks first: flash or cuDNN.

        Both are flash-attention-style kernels that apply ``is_causal`` inside the
        kernel (cuDNN also takes a mask). The memory-efficient kernel never
        materialises the score matrix either, but it is the slower fallback (and the
        only fused kernel torch reaches with a mask where cuDNN ranks after math, e.g.
        on sm80); math materialises it. Neither counts as fast.
        """
        return self.backend in FAST_BACKENDS

    def reasons_lost(self, backend: SdpaBackend = SdpaBackend.FLASH) -> tuple[str, ...]:
        """Why ``backend`` was ruled out (empty if it was usable)."""
        return self.ruling(backend).reasons


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
