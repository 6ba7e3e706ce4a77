"""Cross-entropy chunk sizing: how many tokens of logits fit a memory budget.

:func:`ce_chunk_plan` scales a loss's bytes per logit element (measured by
:func:`~probewise.throughput.measure_bytes_per_logit`, or a known figure) up to the
real vocabulary and token count and says how to chunk the loss to fit; its integers
are bounded so that every byte figure is a finite float. :class:`LogitsDtype` is the
dtype the logits are held in. :mod:`probewise.throughput.data.lengths` names these
too.
"""

from __future__ import annotations

import enum
import math
from typing import final

import attrs

from probewise import _json
from probewise._validation import finite, positive, shown_int
from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.throughput._torch_dtype import TorchDtype, torch_dtype_name

__all__ = ["ChunkPlan", "LogitsDtype", "ce_chunk_plan"]


@enum.unique
class LogitsDtype(enum.Enum):
    """The dtype the logits are held in."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return 4 if self is LogitsDtype.FLOAT32 else 2

    @classmethod
    def parse(cls, name: LogitsDtype | str | TorchDtype) -> LogitsDtype:
        """From ``"float32"``/``"fp32"``, ``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"``,
        or a torch dtype (``torch.float32``), recognised without importing torch.

        A :class:`LogitsDtype` is returned as it is; anything else that is not a
        ``str`` or a torch dtype is an :class:`~probewise.errors.InvalidInputError`.
        """
        if isinstance(name, LogitsDtype):
            return name
        text = name if isinstance(name, str) else torch_dtype_name(name)
        if text is None:
            raise InvalidInputError(
                f"logits_dtype must be a LogitsDtype, str or torch dtype, got {name!r}"
            )
        aliases = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}
        key = text.strip().lower().removeprefix("torch.")
        try:
            return cls(aliases.get(key, key))
        except ValueError:
            choices = ", ".join(m.value for m in cls)
            raise InvalidInputError(
                f"unknown logits dtype {name!r}; choose one of {choices}"
            ) from None


DEFAULT_EXTRA_BYTES_PER_LOGIT = 12
"""Bytes per logit element beyond the logits themselves, when none is measured.

A cross-entropy loss peaks in its backward, at the log-softmax gradient: besides the
resident logits, three fp32 buffers per element are live (the saved log-softmax,
the gradient arriving from the NLL, and the gradient it produces), 12 bytes. So the
default is ``itemsize + 12``: 14 bytes per element for bf16 logits, 16 for fp32.
:func:`measure_bytes_per_logit` measured exactly that on CPU for HF's
``ForCausalLMLoss`` on bf16 logits (14.0) and for ``F.cross_entropy`` on fp32 logits
(16.0), tracking live tensor storage at every op. (An earlier figure of about 12.3
for HF's loss, quoted in the issue that asked for this plan, came from a method that
is not recorded; it is close to this one's peak without the logits.) Measure your
own loss rather than rely on the default.
"""


@_json.shaped(
    _json.Shape(
        after={
            "logit_elements": "budget_bytes",
            "logits_bytes": "logit_elements",
            "peak_bytes_unchunked": "n_chunks",
            "peak_bytes_chunked": "peak_bytes_unchunked",
            "fits_unchunked": "peak_bytes_chunked",
        }
    )
)
@final
@attrs.frozen(kw_only=True)
class ChunkPlan:
    """How many tokens' logits fit a memory budget at once, and how many chunks that makes.

    ``peak_bytes_unchunked`` is ``tokens * vocab_size * bytes_per_logit``: the loss's
    peak if the whole logits tensor is live at once; ``peak_bytes_chunked`` the same
    for one chunk of ``chunk_tokens``.
    """

    tokens: int = attrs.field(validator=positive)
    vocab_size: int = attrs.field(validator=positive)
    logits_dtype: LogitsDtype
    bytes_per_logit: float = attrs.field(validator=finite)
    bytes_per_logit_measured: bool
    """False when ``bytes_per_logit`` is the documented default rather than the caller's figure."""
    budget_bytes: int = attrs.field(validator=positive)
    chunk_tokens: int = attrs.field(validator=positive)
    n_chunks: int = attrs.field(validator=positive)

    def __attrs_post_init__(self) -> None:
        if self.bytes_per_logit <= 0:
            raise InvalidInputError(f"bytes_per_logit must be > 0, got {self.bytes_per_logit}")
        if self.chunk_tokens > self.tokens:
            raise InvalidInputError("chunk_tokens must be <= tokens")
        if self.n_chunks != -(-self.tokens // self.chunk_tokens):
            raise InvalidInputError("n_chunks must be ceil(tokens / chunk_tokens)")

    @property
    def logit_elements(self) -> int:
        """``tokens * vocab_size``."""
        return self.tokens * self.vocab_size

    @property
    def logits_bytes(self) -> int:
        """The logits tensor alone, in ``logits_dtype``."""
        return self.logit_elements * self.logits_dtype.itemsize

    @property
    def peak_bytes_unchunked(self) -> int:
        """Loss peak with every token's logits live at once."""
        return math.ceil(self.logit_elements * self.bytes_per_logit)

    @property
    def peak_bytes_chunked(self) -> int:
        """Loss peak for one chunk of ``chunk_tokens``."""
        return math.ceil(self.chunk_tokens * self.vocab_size * self.bytes_per_logit)

    @property
    def fits_unchunked(self) -> bool:
        """Whether no chunking is needed."""
        return self.peak_bytes_unchunked <= self.budget_bytes

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict, derived figures included."""
        return _json.to_dict(self)


_MAX_PLAN_INT = 1 << 100
"""Bound on :func:`ce_chunk_plan`'s integers, so that every byte figure is a finite float."""


def ce_chunk_plan(
    tokens: int,
    vocab_size: int,
    *,
    budget_bytes: int,
    logits_dtype: LogitsDtype | str | TorchDtype = LogitsDtype.BFLOAT16,
    bytes_per_logit: float | None = None,
    multiple_of: int = 1,
) -> ChunkPlan:
    """The largest chunk of tokens whose loss fits ``budget_bytes``, and the chunk count.

    Args:
        tokens: tokens whose logits the loss sees in one step (e.g. a batch's slots).
        vocab_size: the logits' last dimension.
        budget_bytes: memory the loss may use at once.
        logits_dtype: dtype of the logits (a :class:`LogitsDtype` or its name).
        bytes_per_logit: peak bytes per logit element of *your* loss, forward plus
            backward, as :func:`measure_bytes_per_logit` measures it. ``None`` takes
            ``itemsize + DEFAULT_EXTRA_BYTES_PER_LOGIT`` (the logits and three fp32
            buffers at the log-softmax backward: 14 bytes for bf16, 16 for fp32) and the
            plan says it was not measured.
        multiple_of: round the chunk down to a multiple of this (e.g. 8 for tensor
            cores), unless that would make it zero.

    Raises:
        InvalidInputError: non-positive arguments (or integers above 2**100), or a
            budget below one token's logits (no chunk size can fit).
    """
    for name, value in (
        ("tokens", tokens),
        ("vocab_size", vocab_size),
        ("budget_bytes", budget_bytes),
        ("multiple_of", multiple_of),
    ):
        if isinstance(value, bool) or not isinstance(value, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeValueError(f"{name} must be an int, got a {type(value).__name__}")
        if not 1 <= value <= _MAX_PLAN_INT:
            raise InvalidInputError(f"{name} must be between 1 and 2**100, got {shown_int(value)}")
    dtype = LogitsDtype.parse(logits_dtype)
    measured = bytes_per_logit is not None
    per_element = (
        float(bytes_per_logit)
        if bytes_per_logit is not None
        else float(dtype.itemsize + DEFAULT_EXTRA_BYTES_PER_LOGIT)
    )
    if not (math.isfinite(per_element) and per_element > 0):
        raise InvalidInputError(f"bytes_per_logit must be finite and > 0, got {bytes_per_logit}")
    per_token = vocab_size * per_element
    fit = math.floor(budget_bytes / per_token)
    if fit < 1:
        raise InvalidInputError(
            f"a budget of {budget_bytes} bytes holds no token's logits: one token needs "
            f"{math.ceil(per_token)} bytes ({vocab_size} x {per_element:g} bytes per logit)"
        )
    chunk = min(fit, tokens)
    if chunk < tokens and chunk >= multiple_of:
        chunk -= chunk % multiple_of
    return ChunkPlan(
        tokens=tokens,
        vocab_size=vocab_size,
        logits_dtype=dtype,
        bytes_per_logit=per_element,
        bytes_per_logit_measured=measured,
        budget_bytes=budget_bytes,
        chunk_tokens=chunk,
        n_chunks=-(-tokens // chunk),
    )
