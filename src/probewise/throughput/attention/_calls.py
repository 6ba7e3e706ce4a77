"""What stands in for the attention call while the probe's forward runs.

:class:`CallRecorder` takes the place of ``torch.nn.functional.scaled_dot_product_attention``
(:meth:`CallRecorder.record`) or, under another implementation, of transformers'
attention function (:meth:`CallRecorder.attend`): it keeps each call an attention
module of the probe's thread makes as a :class:`._records.RawCall` (and each distinct
mask tensor it passes), and returns an empty output of the call's shape.
:func:`recording` swaps it in with the other stand-ins the implementation needs (the
mask builders of :mod:`._stand_ins` and :mod:`._implementations`, the flash kernels of
:mod:`._flash`). :mod:`._recorder` builds and runs the model under it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator

import torch

from probewise.errors import UnsupportedModelError
from probewise.throughput.attention import _implementations
from probewise.throughput.attention._config import ResolvedConfig
from probewise.throughput.attention._records import RawCall
from probewise.throughput.attention._scenario import AttentionKind
from probewise.throughput.attention._stand_ins import (
    StandIn,
    stand_in_for,
    structured_masks,
    structured_sdpa_mask,
)

__all__ = ["CallRecorder", "recording"]

_SDPA_LOCK = threading.Lock()


@contextlib.contextmanager
def _recording_sdpa(
    record: Callable[..., torch.Tensor], original_out: list[Callable[..., torch.Tensor]]
) -> Generator[None]:
    """Swap ``record`` in for SDPA (``original_out`` receives the real one, which
    ``record`` hands every call that is not the probe's own)."""
    functional = torch.nn.functional
    with _SDPA_LOCK:
        original = functional.scaled_dot_product_attention
        original_out.append(original)
        functional.scaled_dot_product_attention = record
        try:
            yield
        finally:
            functional.scaled_dot_product_attention = original


class CallRecorder:
    """What stands in for SDPA during the probe's forward: :meth:`record` keeps each
    call an attention module of this thread makes (and each distinct mask it passes)
    and returns an empty output; any other call goes to the real SDPA."""

    def __init__(self, resolved: ResolvedConfig, current: list[torch.nn.Module]) -> None:
        self.resolved = resolved
        self.current = current
        self.flash_calls: list[dict[str, object]] = []
        """What the stand-in flash kernels were called with (:mod:`._flash`)."""
        self.calls: list[RawCall] = []
        self.kept: dict[int, torch.Tensor] = {}
        """``mask_id`` -> the mask tensor SDPA got."""
        self.original: list[Callable[..., torch.Tensor]] = []
        """The real SDPA, once :func:`_recording_sdpa` has swapped :meth:`record` in."""
        self.thread = threading.get_ident()
        self.mask_ids: dict[tuple[object, ...], int] = {}

    def record(  # noqa: PLR0917  (torch's own signature)
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        if threading.get_ident() != self.thread or not self.current:
            # Another thread's call, or one outside an attention module: not ours.
            return self.original[0](
                query,
                key,
                value,
                attn_mask=attn_mask,
                dropout_p=dropout_p,
                is_causal=is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )
        self.calls.append(
            self.raw_call(
                self.current[-1],
                (query, key, value),
                attn_mask,
                is_causal=bool(is_causal),
                dropout=float(dropout_p),
                enable_gqa=bool(enable_gqa),
            )
        )
        out_shape = (*query.shape[:-1], value.shape[-1])
        return torch.empty(out_shape, dtype=query.dtype, device=query.device)

    def attend(  # noqa: PLR0917  (transformers' attention-function signature)
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: object,
        dropout: float = 0.0,
        scaling: float | None = None,
        **kwargs: object,
    ) -> tuple[torch.Tensor, None]:
        """The attention function, for an implementation other than SDPA: keeps the
        call (the mask it got, the flash kernel call) and returns an empty output."""
        del scaling
        kind = self.resolved.kind
        mask = attention_mask if isinstance(attention_mask, torch.Tensor) else None
        flash = None
        if kind is AttentionKind.FLASH:
            from probewise.throughput.attention._flash import flash_call

            flash = flash_call(module, query, mask, kwargs, self.flash_calls)
            mask = None  # the 2-D padding mask: the kernel call says what it did
        elif mask is not None and mask.ndim != 4:
            raise UnsupportedModelError(f"a {mask.ndim}-D attention mask reached {kind.value}")
        softcap = kwargs.get("softcap")
        self.calls.append(
            self.raw_call(
                module,
                (query, key, value),
                mask,
                is_causal=flash.causal if flash is not None else False,
                dropout=float(dropout),
                enable_gqa=kind is not AttentionKind.EAGER,
                softcap=float(softcap) if isinstance(softcap, int | float) and softcap else None,
                sinks=kwargs.get("s_aux") is not None,
                flash=flash,
            )
        )
        batch, heads, length, _ = query.shape
        out = torch.empty(
            (batch, length, heads, value.shape[-1]), dtype=query.dtype, device=query.device
        )
        return out, None

    def raw_call(
        self,
        module: torch.nn.Module,
        qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        mask: torch.Tensor | None,
        **flags: object,
    ) -> RawCall:
        """One call of ``module`` as a :class:`RawCall` (``flags``: the call's own)."""
        query, key, value = qkv
        layer_type, window = self.layer_type(module)
        return RawCall(
            layer_index=int(getattr(module, "layer_idx", -1)),
            layer_type=layer_type,
            sliding_window=window,
            chunk_size=self.resolved.chunk_size if layer_type == "chunked_attention" else None,
            kv_groups=int(getattr(module, "num_key_value_groups", 1) or 1),
            query_shape=_shape4(query),
            key_shape=_shape4(key),
            value_shape=_shape4(value),
            dtype=str(query.dtype).removeprefix("torch."),
            mask_id=None if mask is None else self.mask_id(mask),
            mask_dtype_bool=mask is not None and mask.dtype == torch.bool,
            mask_shape=None if mask is None else tuple(int(s) for s in mask.shape),
            **flags,  # type: ignore[arg-type]
        )

    def layer_type(self, module: torch.nn.Module) -> tuple[str, int | None]:
        """The attention module's layer type and sliding window (``None``: none)."""
        index = int(getattr(module, "layer_idx", -1))
        layer_type: object = getattr(module, "layer_type", None)
        window: object = getattr(module, "sliding_window", None)
        layer_types, model_window = self.resolved.layer_types, self.resolved.sliding_window
        if not isinstance(layer_type, str):
            if 0 <= index < len(layer_types):
                layer_type = layer_types[index]
            elif model_window is not None:
                # One window for every layer (Mistral): no layer_types in the config.
                layer_type, window = "sliding_attention", model_window
            else:
                layer_type = "full_attention"
        return str(layer_type), window if isinstance(window, int) else None

    def mask_id(self, attn_mask: torch.Tensor) -> int:
        """The mask's id: one per distinct tensor (storage, shape, strides, dtype)."""
        if attn_mask.is_meta:
            raise UnsupportedModelError("the attention mask reached SDPA without values")
        identity = (
            attn_mask.data_ptr(),
            tuple(attn_mask.shape),
            attn_mask.stride(),
            attn_mask.dtype,
        )
        mask_id = self.mask_ids.setdefault(identity, len(self.mask_ids))
        self.kept.setdefault(mask_id, attn_mask)
        return mask_id


@contextlib.contextmanager
def recording(
    recorder: CallRecorder, stand_ins: dict[int, StandIn], *, structured: bool
) -> Generator[None]:
    """What stands in while the forward runs: for SDPA, the recorder as torch's SDPA and
    stand-in masks; for the others, the recorder as the attention function and the
    implementation's mask builder (:mod:`._implementations`), with stand-in flash
    kernels for a flash one."""
    implementation = recorder.resolved.implementation
    if recorder.resolved.kind is AttentionKind.SDPA:
        with (
            _recording_sdpa(recorder.record, recorder.original),
            structured_masks(stand_ins, enabled=structured),
        ):
            yield
        return
    from probewise.throughput.attention._flash import stand_in_kernels

    reader = (
        structured_sdpa_mask(_implementations.masking("sdpa_mask"), stand_ins)
        if structured
        else None
    )
    with (
        _implementations.attention_interface(implementation, recorder.attend),
        _implementations.mask_builders(
            implementation, structured=reader, stand_ins=stand_ins, stand_in_for=stand_in_for
        ),
        stand_in_kernels(implementation, recorder.flash_calls),
    ):
        yield


def _shape4(tensor: torch.Tensor) -> tuple[int, int, int, int]:
    if tensor.ndim != 4:
        raise UnsupportedModelError(f"an SDPA input of {tensor.ndim} dims (expected 4)")
    a, b, c, d = (int(s) for s in tensor.shape)
    return a, b, c, d
