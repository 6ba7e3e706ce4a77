"""FlashAttention's path through transformers, driven with stand-in kernels (no GPU).

transformers hands a flash implementation (``flash_attention_2``/``_3``, or a hub
kernel that exposes ``flash_attn_varlen_func``) no attention-sized mask: the mask
builder (``flash_attention_mask``) returns the 2-D padding mask or ``None``, and
``_flash_attention_forward`` then picks the kernel call itself: unpadded varlen from
that mask, varlen from ``cu_seq_lens_*`` keyword arguments, varlen from packed
``position_ids`` (only for a batch of one row), or the plain kernel over whole rows.

The kernels cannot run here, so :func:`flash_call` runs transformers' own
``flash_attention_forward`` with stand-ins in place of the kernels: functions with the
flash-attn signatures (so transformers' feature detection, ``_lazy_define_process_
function``, reads them as it reads the real ones) that record what they are called
with (``cu_seqlens``, ``causal``, ``window_size``, ``softcap``, attention sinks) and
return zeros. Queries, keys and values are one head of width one: the path depends
on the batch, the lengths, the mask and the position ids, not on the widths.

This module imports torch and transformers; the mask probe imports it only when a
flash implementation is probed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Mapping
from typing import cast

import torch
from transformers import modeling_flash_attention_utils as fa_utils
from transformers.integrations import flash_attention

from probewise.throughput.attention._paths import FlashCall

__all__ = ["FlashCall", "flash_call", "stand_in_kernels"]

_LOCK = threading.Lock()


def _fa(name: str) -> Callable[..., object]:
    """A function of transformers' flash helpers, typed as a plain callable."""
    return cast("Callable[..., object]", getattr(fa_utils, name))


def _ints(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(x) for x in tensor.detach().to(torch.int64).cpu().numpy())


def _record(
    calls: list[dict[str, object]], q: torch.Tensor, kw: Mapping[str, object]
) -> torch.Tensor:
    calls.append(dict(kw))
    return torch.zeros_like(q)


def _record_varlen(  # noqa: PLR0917
    calls: list[dict[str, object]],
    q: torch.Tensor,
    cu_seqlens: torch.Tensor,
    causal: bool,
    window_size: tuple[int, int],
    softcap: float,
) -> torch.Tensor:
    made = {"cu_seqlens": _ints(cu_seqlens), "causal": causal, "window_size": window_size}
    return _record(calls, q, {**made, "softcap": softcap})


def _fa2_kernels(calls: list[dict[str, object]]) -> tuple[Callable[..., object], ...]:
    """Stand-ins with flash-attn 2's signatures (``flash_attn_func``, ``..._varlen_func``)."""

    def flash_attn_func(  # noqa: PLR0917  (flash-attn's own signature)
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        dropout_p: float = 0.0,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        alibi_slopes: object = None,
        deterministic: bool = False,
        return_attn_probs: bool = False,
    ) -> torch.Tensor:
        return _record(calls, q, {"causal": causal, "window_size": window_size, "softcap": softcap})

    def flash_attn_varlen_func(  # noqa: PLR0917  (flash-attn's own signature)
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        dropout_p: float = 0.0,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        alibi_slopes: object = None,
        deterministic: bool = False,
        return_attn_probs: bool = False,
        block_table: object = None,
    ) -> torch.Tensor:
        return _record_varlen(calls, q, cu_seqlens_q, causal, window_size, softcap)

    return flash_attn_func, flash_attn_varlen_func


def _fa3_kernels(calls: list[dict[str, object]]) -> tuple[Callable[..., object], ...]:
    """Stand-ins with flash-attn 3's (``flash_attn_interface``) signatures: no dropout."""

    def flash_attn_func(  # noqa: PLR0917  (flash-attn's own signature)
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        deterministic: bool = False,
    ) -> torch.Tensor:
        return _record(calls, q, {"causal": causal, "window_size": window_size, "softcap": softcap})

    def flash_attn_varlen_func(  # noqa: PLR0917  (flash-attn's own signature)
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        softmax_scale: float | None = None,
        causal: bool = False,
        window_size: tuple[int, int] = (-1, -1),
        softcap: float = 0.0,
        deterministic: bool = False,
    ) -> torch.Tensor:
        return _record_varlen(calls, q, cu_seqlens_q, causal, window_size, softcap)

    return flash_attn_func, flash_attn_varlen_func


@contextlib.contextmanager
def stand_in_kernels(implementation: str, calls: list[dict[str, object]]) -> Generator[None]:
    """transformers' flash helpers get the stand-in kernels for ``implementation``
    (flash-attn 3's signatures for ``flash_attention_3``, 2's otherwise)."""
    make = _fa3_kernels if implementation == "flash_attention_3" else _fa2_kernels
    plain, varlen = make(calls)
    loaded: tuple[tuple[object, ...], tuple[object, ...]] = (
        (plain, varlen, None, _fa("_pad_input"), _fa("_unpad_input")),
        (_fa("_lazy_define_process_function")(varlen), dict),
    )

    def lazy_import(*_args: object, **_kwargs: object) -> object:
        return loaded

    with _LOCK:
        original = _fa("lazy_import_flash_attention")
        setattr(fa_utils, "lazy_import_flash_attention", lazy_import)  # noqa: B010
        try:
            yield
        finally:
            setattr(fa_utils, "lazy_import_flash_attention", original)  # noqa: B010


def flash_call(
    module: torch.nn.Module,
    query: torch.Tensor,
    attention_mask: torch.Tensor | None,
    kwargs: Mapping[str, object],
    calls: list[dict[str, object]],
) -> FlashCall:
    """Run transformers' ``flash_attention_forward`` for one layer's call (``query``
    of shape ``(batch, heads, length, dim)``, any device) on one-wide stand-in
    tensors, with :func:`stand_in_kernels` in place, and read the kernel call."""
    batch, _, length, _ = (int(s) for s in query.shape)
    small = torch.zeros((batch, 1, length, 1), dtype=torch.float16)
    extra = {k: v for k, v in kwargs.items() if k not in ("dropout", "scaling", "s_aux")}
    sinks = kwargs.get("s_aux")
    before = len(calls)
    forward = cast("Callable[..., object]", getattr(flash_attention, "flash_attention_forward"))  # noqa: B009
    forward(
        module,
        small,
        small,
        small,
        attention_mask,
        dropout=0.0,
        scaling=None,
        s_aux=None if sinks is None else torch.zeros((1,), dtype=torch.float16),
        **extra,
    )
    (made,) = calls[before:]
    window_size = cast("tuple[int, int]", made.get("window_size", (-1, -1)))
    softcap = cast("float", made.get("softcap", 0.0))
    seqlens = cast("tuple[int, ...]", made.get("cu_seqlens", ()))
    return FlashCall(
        varlen="cu_seqlens" in made,
        cu_seqlens=seqlens,
        causal=bool(made.get("causal", False)),
        window=None if window_size[0] < 0 else int(window_size[0]) + 1,
        softcap=None if not softcap else float(softcap),
        sinks_passed="s_aux" in made or "learnable_sink" in made,
    )
