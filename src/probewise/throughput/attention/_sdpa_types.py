"""The values of the SDPA backend prediction: the backends, dtypes and mask kinds, a
recorded call (:class:`SdpaCall`), the CUDA environment assumed
(:class:`SdpaEnvironment`), and a prediction with each backend's ruling.

:mod:`probewise.throughput.attention.sdpa` holds the selection rules that make a
prediction from a call (:func:`~probewise.throughput.attention.sdpa.predict_backend`);
these values sit beneath it and never import it. It never imports torch.
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
    "AttentionDtype",
    "BackendPrediction",
    "BackendRuling",
    "MaskKind",
    "SdpaBackend",
    "SdpaCall",
    "SdpaEnvironment",
    "as_capability",
]


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
