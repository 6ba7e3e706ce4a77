"""The mask probe under an attention implementation other than SDPA.

transformers builds the same composed mask function whatever the implementation;
what differs is the mask builder it hands that function to
(``AttentionMaskInterface``) and the attention function that receives the result
(``AttentionInterface``, or the model's own ``eager_attention_forward``):

- ``eager``: ``eager_mask`` always materialises the mask, as an additive float
  tensor of the model's dtype (``sdpa_mask`` with ``allow_is_causal_skip=False``,
  then ``torch.where``). Here it is read as row intervals like SDPA's (a one-element
  stand-in reaches the layer) and its bytes are what ``eager_mask`` allocates.
- ``flex_attention``: ``flex_attention_mask`` compiles the same function into a
  ``BlockMask``. The probe does not build it (compiling and evaluating it on every
  pair is what the probe avoids); it reads the function as ``sdpa_mask`` would
  build it without the causal skip, and the block counts and bytes are derived from
  that (:mod:`probewise.throughput.attention._paths`).
- flash implementations: ``flash_attention_mask`` (real) passes the 2-D padding
  mask or nothing, and :mod:`probewise.throughput.attention._flash` drives
  transformers' own flash forward with stand-in kernels.

For every implementation but SDPA the probe stands in for the attention function
itself: while the forward runs, the implementation's name is registered in
transformers' ``AttentionInterface`` with the recorder's ``attend`` (:mod:`._calls`),
which keeps the call (and the flash kernel call) and returns an empty output. Which
implementation runs, and whether the model supports it, is settled with the config
(:mod:`._config`).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from transformers import masking_utils
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from probewise.throughput.attention._scenario import AttentionKind, attention_kind

if TYPE_CHECKING:
    from probewise.throughput.attention._stand_ins import StandIn

__all__ = ["attention_interface", "mask_builders", "masking"]


def masking(name: str) -> Callable[..., object]:
    """A function of transformers' ``masking_utils``, typed as a plain callable."""
    return cast("Callable[..., object]", getattr(masking_utils, name))


_ATTENTION_LOCK = threading.Lock()
_MASK_LOCK = threading.Lock()


def _register(
    interface: object, name: str, value: Callable[..., object] | None
) -> Callable[..., object] | None:
    """Set (``None``: remove) ``name`` in a transformers interface's class-wide
    mapping; returns what was there."""
    mapping = cast("dict[str, Callable[..., object]]", getattr(interface, "_global_mapping"))  # noqa: B009
    previous = mapping.get(name)
    if value is None:
        mapping.pop(name, None)
    else:
        mapping[name] = value
    return previous


@contextlib.contextmanager
def attention_interface(
    name: str, attend: Callable[..., tuple[torch.Tensor, None]]
) -> Generator[None]:
    """``attend`` registered as attention implementation ``name`` (eager included:
    a registered ``"eager"`` wins over the model's own ``eager_attention_forward``),
    and for a hub kernel the flash mask builder under its name, as transformers'
    ``load_and_register_attn_kernel`` registers it."""
    hub = attention_kind(name) is AttentionKind.FLASH and "/" in name
    mask_interface = masking_utils.AttentionMaskInterface
    with _ATTENTION_LOCK:
        previous = _register(ALL_ATTENTION_FUNCTIONS, name, attend)
        previous_mask = (
            _register(mask_interface, name, masking("flash_attention_mask")) if hub else None
        )
        try:
            yield
        finally:
            _register(ALL_ATTENTION_FUNCTIONS, name, previous)
            if hub:
                _register(mask_interface, name, previous_mask)


def _arguments(
    signature: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[dict[str, object], dict[str, object]]:
    """A mask builder's call, bound: its named arguments (defaults applied) and its
    ``**kwargs`` (less ``allow_is_causal_skip``, which the probe sets)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    extra = dict(cast("dict[str, object]", arguments.pop("kwargs", {})))
    extra.pop("allow_is_causal_skip", None)
    return arguments, extra


def _eager_builder(
    structured: Callable[..., object] | None,
    stand_ins: dict[int, StandIn],
    stand_in_for: Callable[[torch.Tensor, Mapping[int, StandIn]], StandIn | None],
) -> Callable[..., object]:
    """``eager_mask``: transformers' ``sdpa_mask`` without the causal skip (read as
    row intervals through ``structured`` where it can be), then the additive float
    mask ``eager_mask`` makes of it; a stand-in of that mask where it was read."""
    original = masking("sdpa_mask")
    signature = inspect.signature(masking("eager_mask"))

    def build(*args: object, **kwargs: object) -> object:
        arguments, extra = _arguments(signature, args, kwargs)
        dtype = cast("torch.dtype", arguments.pop("dtype"))
        builder = structured if structured is not None else original
        mask = builder(**arguments, **extra, allow_is_causal_skip=False)
        if not isinstance(mask, torch.Tensor):
            return mask
        read = stand_in_for(mask, stand_ins)
        if read is None:
            return torch.where(mask, torch.zeros((), dtype=dtype), torch.finfo(dtype).min)
        from probewise.throughput.attention._stand_ins import StandIn

        tensor = torch.zeros((1, 1, 1, 1), dtype=dtype).expand(mask.shape)
        nbytes = int(np.prod(mask.shape, dtype=np.int64)) * dtype.itemsize
        stand_ins[tensor.untyped_storage().data_ptr()] = StandIn(
            tensor=tensor, intervals=read.intervals, nbytes=nbytes
        )
        return tensor

    return build


def _flex_builder(structured: Callable[..., object] | None) -> Callable[..., object]:
    """``flex_attention_mask``: the function as ``sdpa_mask`` builds it without the
    causal skip (a stand-in where ``structured`` reads it), in place of the
    ``BlockMask`` (whose blocks the probe derives from it)."""
    original = masking("sdpa_mask")
    signature = inspect.signature(masking("flex_attention_mask"))

    def build(*args: object, **kwargs: object) -> object:
        arguments, _extra = _arguments(signature, args, kwargs)
        builder = structured if structured is not None else original
        return builder(**arguments, allow_is_causal_skip=False)

    return build


@contextlib.contextmanager
def mask_builders(
    name: str,
    *,
    structured: Callable[..., object] | None,
    stand_ins: dict[int, StandIn],
    stand_in_for: Callable[[torch.Tensor, Mapping[int, StandIn]], StandIn | None],
) -> Generator[None]:
    """The probe's mask builder for ``name`` (eager or flex; nothing for the others)
    registered in transformers' ``AttentionMaskInterface`` while the forward runs."""
    kind = attention_kind(name)
    if kind is AttentionKind.EAGER:
        builder = _eager_builder(structured, stand_ins, stand_in_for)
    elif kind is AttentionKind.FLEX:
        builder = _flex_builder(structured)
    else:
        yield
        return
    interface = masking_utils.AttentionMaskInterface
    with _MASK_LOCK:
        previous = _register(interface, name, builder)
        try:
            yield
        finally:
            _register(interface, name, previous)
