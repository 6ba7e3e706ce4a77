"""torch dtypes, recognised without importing torch.

A PyTorch user passes ``torch.float32`` where probewise asks for a dtype; the default
install has no torch, and importing it only to compare would cost seconds. So a torch
dtype is recognised by its type alone: the class is ``dtype`` of module ``torch``
(``type(torch.float32)``) and its ``str`` is ``torch.<name>``. :class:`TorchDtype` is
its static type; :func:`torch_dtype_name` the runtime check, which the dtype parsers
(:meth:`~probewise.throughput.LogitsDtype.parse`,
:meth:`~probewise.throughput.AttentionDtype.parse`) share.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["TorchDtype", "torch_dtype_name"]


class TorchDtype(Protocol):
    """The static type of a ``torch.dtype`` (e.g. ``torch.bfloat16``), without torch.

    Any ``torch.dtype`` matches it. At run time only a real torch dtype is accepted
    (its class is ``torch.dtype``); another object with these attributes is refused.
    """

    @property
    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating-point one."""
        ...

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        ...


def torch_dtype_name(value: object) -> str | None:
    """``"float32"`` for ``torch.float32`` (and so on); ``None`` for anything that is
    not a torch dtype. torch is never imported."""
    kind = type(value)
    if kind.__module__ != "torch" or kind.__qualname__ != "dtype":
        return None
    text = str(value)
    return text.removeprefix("torch.") if text.startswith("torch.") else None
