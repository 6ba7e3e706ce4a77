"""How many bytes per logit element a cross-entropy loss holds at its peak, measured.

:func:`measure_bytes_per_logit` runs the caller's own loss function (never a copy of
it) on CPU, on random logits at a shrunken vocabulary and token count, and tracks the
live tensor storage bytes through every aten op the forward and backward dispatch.
The peak, divided by the number of logit elements, is the ``bytes_per_logit`` a
:class:`~probewise.throughput.ChunkPlan` scales up to the real vocabulary and length.

Conventions
-----------
*Live bytes* are the bytes of the distinct untyped storages alive at a moment: a view
shares its base's storage and adds nothing. A storage counts from the op that returns
it until the last reference to it goes (a weak reference's callback says when). The
logits and labels, made before the loss is called, count from the start: the peak is
what is *resident*, logits included. For HF's causal-LM loss on bf16 logits the
forward holds ``2`` (logits) ``+ 4`` (fp32 upcast) ``+ 4`` (log-softmax) bytes per
element; the peak comes in the backward, once the upcast is gone, at the log-softmax
backward: ``2`` (logits) ``+ 4`` (saved log-softmax) ``+ 4`` (gradient from the NLL)
``+ 4`` (its output), 14 bytes per element. Scratch memory a kernel allocates and frees inside one op is not seen, nor
is allocator rounding; the elementwise memory of a CE loss grows with the number of
logits, so the ratio carries over to the full size.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import attrs

from probewise import _json
from probewise._extras import Extra, requires
from probewise._validation import checked_type, finite_non_negative, positive
from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.throughput._torch_dtype import TorchDtype
from probewise.throughput.data.ce_chunks import LogitsDtype

if TYPE_CHECKING:
    import torch

__all__ = ["LogitMemory", "measure_bytes_per_logit"]


@final
@attrs.frozen(kw_only=True)
class LogitMemory:
    """The measured peak of one loss function, and that peak per logit element.

    ``tokens`` counts every token measured (``batch * tokens`` of the call);
    ``peak_bytes`` is the most live tensor storage seen at once, the logits and
    labels included; ``logits_bytes`` is ``tokens * vocab_size * itemsize`` and
    ``bytes_per_logit`` is ``peak_bytes / (tokens * vocab_size)``.
    """

    vocab_size: int = attrs.field(validator=positive)
    tokens: int = attrs.field(validator=positive)
    logits_dtype: LogitsDtype = attrs.field(validator=checked_type(LogitsDtype))
    backward: bool
    peak_bytes: int = attrs.field(validator=positive)
    logits_bytes: int = attrs.field(validator=positive)
    bytes_per_logit: float = attrs.field(validator=finite_non_negative)

    def __attrs_post_init__(self) -> None:
        expected = self.tokens * self.vocab_size * self.logits_dtype.itemsize
        if self.logits_bytes != expected:
            raise InvalidInputError(
                f"logits_bytes must be tokens * vocab_size * itemsize = {expected}, "
                f"got {self.logits_bytes}"
            )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict; the dtype as its name (e.g. ``"bfloat16"``)."""
        return _json.to_dict(self)


def measure_bytes_per_logit(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    vocab_size: int = 2048,
    tokens: int = 512,
    batch: int = 1,
    logits_dtype: LogitsDtype | str | TorchDtype = LogitsDtype.BFLOAT16,
    backward: bool = True,
    seed: int = 0,
) -> LogitMemory:
    """Peak live tensor bytes per logit element of ``loss_fn``, forward (and backward).

    ``loss_fn(logits, labels)`` is called twice on CPU (the first a warm-up, not
    reported: see the comment in the code) with ``logits`` a leaf of shape
    ``(batch, tokens, vocab_size)`` in ``logits_dtype`` that requires grad, and
    ``labels`` an ``int64`` tensor of shape ``(batch, tokens)`` drawn uniformly from
    ``[0, vocab_size)``; both are seeded by ``seed``. It must return a scalar tensor;
    with ``backward`` its ``.backward()`` runs inside the measurement too, and the
    gradient of the logits counts. The same call gives the same ``peak_bytes``.

    Args:
        loss_fn: The caller's loss, run as is (e.g. a wrapper around HF's
            ``ForCausalLMLoss`` that passes ``vocab_size``).
        vocab_size: Vocabulary size to measure at (``>= 2``).
        tokens: Tokens per row (``>= 1``).
        batch: Rows (``>= 1``).
        logits_dtype: The logits' dtype, a :class:`LogitsDtype` or its name
            (``"bf16"``, ``"fp16"``, ``"fp32"``, ...).
        backward: Run the backward pass as well.
        seed: Seeds the random logits and labels.

    Returns:
        The peak and its ratio to the number of logit elements.

    Raises:
        InvalidInputError: For a bad argument, or when ``loss_fn`` returns anything
            but a scalar tensor (or, with ``backward``, one that does not require
            grad). Errors raised by ``loss_fn`` itself propagate unchanged.
    """
    for name, value, least in (
        ("vocab_size", vocab_size, 2),
        ("tokens", tokens, 1),
        ("batch", batch, 1),
        ("seed", seed, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeValueError(f"{name} must be an int, got {type(value).__name__}")
        if value < least:
            raise InvalidInputError(f"{name} must be >= {least}, got {value}")
    dtype = LogitsDtype.parse(logits_dtype)

    # Twice, reporting the second: the first call in a process runs one-time work
    # (torch imports torch._dynamo on a dispatch mode's first use, and a caller's loss
    # may compile or cache). Exceptions caught inside such imports leave reference
    # cycles through the stack's frames, which keep the loss's temporaries (an fp32
    # upcast: 4 bytes per element) alive until a cycle collection; the collector is
    # off while measuring, so a first call alone read 18 bytes per element for HF's
    # loss where every later call reads 14. The steady state is what a training step
    # sees.
    with requires(Extra.TORCH, "measure_bytes_per_logit"):
        from probewise.throughput.data._ce_tracker import peak_once

    shape = (batch, tokens, vocab_size)
    peak_once(loss_fn, shape=shape, dtype=dtype, backward=backward, seed=seed)
    gc.collect()
    peak = peak_once(loss_fn, shape=shape, dtype=dtype, backward=backward, seed=seed)

    elements = batch * tokens * vocab_size
    return LogitMemory(
        vocab_size=vocab_size,
        tokens=batch * tokens,
        logits_dtype=dtype,
        backward=backward,
        peak_bytes=peak,
        logits_bytes=elements * dtype.itemsize,
        bytes_per_logit=peak / elements,
    )
