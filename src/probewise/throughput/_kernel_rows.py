"""The parts a kernel table is made of: kinds, rows, exclusions, steps, sources, damage.

These value types sit below both the model (:mod:`probewise.throughput.kernels`, where
:class:`~probewise.throughput.kernels.KernelTable` sums them) and its readers
(:mod:`probewise.throughput.readers`, which make them): a reader returns
:class:`TableParts`, plain per-reading data made of these types, and the table builds
itself from that (``KernelTable.of_parts``). This module imports neither.

Durations are kept on a 1 ns grid: every microsecond value is rounded to three
decimals when an object is built (:func:`to_ns` and :func:`to_us` convert).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Final, TypeVar, cast, final

import attrs
import regex

from probewise import _json
from probewise._validation import (
    checked_type,
    duration,
    non_empty_str,
    non_negative_int,
    optional,
    optional_duration,
)
from probewise.errors import ArgumentTypeError, DamageKind, InvalidInputError

__all__ = [
    "Damage",
    "Exclusion",
    "ExclusionReason",
    "KernelKind",
    "KernelRow",
    "ProgressCallback",
    "StepBreakdown",
    "TableParts",
    "TraceSource",
    "to_ns",
    "to_us",
    "tuple_of",
]

_T = TypeVar("_T")

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_read, total_bytes)`` (bytes of the file on disk)."""


def to_ns(us: float) -> int:
    """Microseconds (already on the grid) to integer nanoseconds."""
    return round(us * 1000)


def to_us(ns: int) -> float:
    """Integer nanoseconds to microseconds."""
    return ns / 1000


# --------------------------------------------------------------------------- kinds

_CLASSIFIED_CHARS: Final = 1 << 16
_ANON: Final = regex.compile(r"\(anonymous namespace\)::")


@enum.unique
class KernelKind(enum.Enum):
    """What a device row does, classified from its name (see :meth:`of`).

    The patterns are tried in a fixed order on the kernel's own identifier (the name with
    ``void``, template arguments and the parameter list stripped), then on the whole
    name, ignoring case; ``OTHER`` when none matches. Which names each kind takes is
    specified in docs/reference/kernel-kinds.md.
    """

    GEMM = "gemm"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    NORMALIZATION = "normalization"
    COMMUNICATION = "communication"
    CONVOLUTION = "convolution"
    EMBEDDING = "embedding"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    OTHER = "other"

    @staticmethod
    def of(name: str) -> KernelKind:
        """Classify a kernel (or device row) by its name (its first 64 KiB characters:
        longer names are not kernel names, and the patterns must not take minutes)."""
        cleaned = _ANON.sub("", name[:_CLASSIFIED_CHARS]).strip()
        if cleaned.startswith("void "):
            cleaned = cleaned[5:]
        head = regex.split(r"[<(]", cleaned, maxsplit=1)[0]
        for text in (head, cleaned):
            for kind, pattern in _KIND_PATTERNS:
                if pattern.search(text):
                    return kind
        return KernelKind.OTHER

    @property
    def is_transfer(self) -> bool:
        """True for MEMCPY and MEMSET, which a table keeps out of ``kernel_us``."""
        return self in (KernelKind.MEMCPY, KernelKind.MEMSET)


_KIND_PATTERNS: Final[tuple[tuple[KernelKind, regex.Pattern[str]], ...]] = tuple(
    (kind, regex.compile(pattern, regex.IGNORECASE))
    for kind, pattern in (
        (KernelKind.MEMCPY, r"^memcpy"),
        (KernelKind.MEMSET, r"^memset"),
        (
            KernelKind.COMMUNICATION,
            r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv",
        ),
        (KernelKind.ATTENTION, r"flash|fmha|attention|attn|sdpa|(?<![a-z])mha"),
        (
            KernelKind.EMBEDDING,
            r"embedding|fbgemm|(?<![a-z])embs(?![a-z])|bounds_check_indices|linearize_index",
        ),
        (
            KernelKind.NORMALIZATION,
            r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|(?<![a-z])bn_[bf]w"
            r"|gammabetabackward|rowwisemoments",
        ),
        (
            KernelKind.CONVOLUTION,
            r"conv|winograd|implicit_gemm|(?<![a-z])(?:[0-9]*fprop|[0-9]*[dw]grad)|scudnn"
            r"|cudnn::cnn|cask_cudnn|cutlass_cudnn|fft2d_(?:r2c|c2r)|im2col",
        ),
        (
            KernelKind.GEMM,
            r"gem[mv]|xmma|cublas|cutlass|matmul|(?<![a-z])(?:b|add|addb)?mm(?![a-z])|cijk_"
            r"|triton_(?:mm|tem)|splitkreduce",
        ),
        (
            KernelKind.REDUCTION,
            r"reduc|softmax|cross_?entropy|nll_?loss|classnllcriterion|arg_?(?:max|min)|topk"
            r"|cumsum|scan|pool|welford|norm|triton_(?:red|per)",
        ),
        (
            KernelKind.ELEMENTWISE,
            r"elementwise|vectorized|pointwise|triton_poi|copy|fill|(?<![a-z])cat|index"
            r"|gather|scatter|transpose|permute|nchw|nhwc|where|relu|gelu|silu|sigmoid|tanh"
            r"|dropout|multi_tensor_apply"
            r"|(?<![a-z])(?:add|mul|div|pow|sub|neg|exp|sqrt|rsqrt)(?![a-z])",
        ),
    )
)


# --------------------------------------------------------------------------- rows


@final
@attrs.frozen(kw_only=True)
class KernelRow:
    """One device row: every launch of one kernel (or copy, or fill), summed.

    ``calls`` is None when the source does not say (a printed table without the
    ``# of Calls`` column). ``device_us`` is rounded to the 1 ns grid.
    """

    name: str = attrs.field(validator=non_empty_str)
    calls: int | None = attrs.field(validator=optional(non_negative_int))
    device_us: float = attrs.field(converter=duration)
    kind: KernelKind = attrs.field(validator=checked_type(KernelKind))

    @classmethod
    def named(cls, name: str, *, calls: int | None, device_us: float) -> KernelRow:
        """A row whose kind is classified from its name (:meth:`KernelKind.of`)."""
        return cls(name=name, calls=calls, device_us=device_us, kind=KernelKind.of(name))

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


@enum.unique
class ExclusionReason(enum.Enum):
    """Why events or rows were left out of the kernel sum."""

    GPU_USER_ANNOTATION = "gpu_user_annotation"
    """A span a user (or the profiler) drew on the device timeline over kernels."""
    STREAM_SYNC = "stream_sync"
    """A stream/event synchronisation span (Kineto ``cuda_sync``): waiting, not work."""
    CPU_OP = "cpu_op"
    """A host-side op or annotation; in key_averages() its device time repeats its kernels'."""
    RUNTIME_CALL = "runtime_call"
    """A host-side runtime or driver API call (``cudaLaunchKernel``, ``hipMemcpy``...)."""
    NOT_A_SPAN = "not_a_span"
    """Instants, flows, counters and metadata: no duration to count."""
    MALFORMED = "malformed"
    """A device event without a usable duration (missing, not a number, or negative)."""
    OTHER = "other"
    """A span of a category this reader does not count (e.g. the profiler's own ``Trace``)."""


@final
@attrs.frozen(kw_only=True)
class Exclusion:
    """``events`` events (or rows) left out for ``reason``; ``total_us`` is the time they carried.

    For trace events ``total_us`` is the sum of their spans; for key_averages() and
    printed-table rows it is their self device time (the time that would have been
    counted twice).
    """

    reason: ExclusionReason = attrs.field(validator=checked_type(ExclusionReason))
    events: int = attrs.field(validator=non_negative_int)
    total_us: float = attrs.field(converter=duration, default=0.0)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


@final
@attrs.frozen(kw_only=True)
class StepBreakdown:
    """Device time attributed to one ``ProfilerStep#N`` (by the host launch of each event).

    ``span_us`` is the host span of the step (the longest one when ranks are merged);
    ``device_events`` counts the kernels, copies and fills attributed to it.
    """

    step: int = attrs.field(validator=non_negative_int)
    span_us: float = attrs.field(converter=duration)
    kernel_us: float = attrs.field(converter=duration)
    memcpy_us: float = attrs.field(converter=duration)
    memset_us: float = attrs.field(converter=duration)
    device_events: int = attrs.field(validator=non_negative_int)

    def __add__(self, other: StepBreakdown) -> StepBreakdown:
        if self.step != other.step:
            raise InvalidInputError(f"cannot add step {self.step} to step {other.step}")
        return StepBreakdown(
            step=self.step,
            span_us=max(self.span_us, other.span_us),
            kernel_us=to_us(to_ns(self.kernel_us) + to_ns(other.kernel_us)),
            memcpy_us=to_us(to_ns(self.memcpy_us) + to_ns(other.memcpy_us)),
            memset_us=to_us(to_ns(self.memset_us) + to_ns(other.memset_us)),
            device_events=self.device_events + other.device_events,
        )

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


@final
@attrs.frozen(kw_only=True)
class Damage:
    """Where a salvaged trace was damaged and what was kept.

    ``offset`` is the byte offset in the decompressed JSON where the damage was
    found; ``events_kept`` the number of complete events read before it (all of
    them are in the table); everything after the damage is lost.
    """

    kind: DamageKind = attrs.field(validator=checked_type(DamageKind))
    offset: int = attrs.field(validator=non_negative_int)
    message: str = attrs.field(validator=checked_type(str))
    events_kept: int = attrs.field(validator=non_negative_int)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


def _notes(value: object) -> tuple[str, ...]:
    if not isinstance(value, tuple | list):
        raise ArgumentTypeError(f"notes must be a tuple of str, got {type(value).__name__}")
    out = tuple(cast("tuple[object, ...] | list[object]", value))
    for item in out:
        if not isinstance(item, str):
            raise ArgumentTypeError(f"notes must be str, got {type(item).__name__}")
    return cast("tuple[str, ...]", out)


def _names(value: object) -> tuple[str, ...]:
    if not isinstance(value, tuple | list):
        raise ArgumentTypeError(f"devices must be a tuple of str, got {type(value).__name__}")
    out: list[str] = []
    for item in cast("tuple[object, ...] | list[object]", value):
        if not isinstance(item, str):
            raise ArgumentTypeError(f"device names must be str, got {type(item).__name__}")
        out.append(item)
    return tuple(out)


@final
@attrs.frozen(kw_only=True)
class TraceSource:
    """One file a table was read from: which rank, what it says about itself, any damage.

    ``devices`` are the ``deviceProperties[].name`` entries (e.g. ``NVIDIA A100``);
    ``display_time_unit`` and ``base_time_ns`` are Kineto's ``displayTimeUnit`` and
    ``baseTimeNanoseconds``, read wherever they sit in the file (Kineto writes them
    after ``traceEvents``). They never change how ``ts``/``dur`` are read: those are
    microseconds in every trace. ``notes`` says what a reader should know about the
    file (a second ``traceEvents`` key, duplicated device events).
    """

    path: str = attrs.field(validator=checked_type(str))
    rank: int | None = attrs.field(default=None, validator=optional(non_negative_int))
    world_size: int | None = attrs.field(default=None, validator=optional(non_negative_int))
    events: int = attrs.field(default=0, validator=non_negative_int)
    devices: tuple[str, ...] = attrs.field(default=(), converter=_names)
    display_time_unit: str | None = attrs.field(default=None, validator=optional(checked_type(str)))
    base_time_ns: int | None = attrs.field(default=None, validator=optional(non_negative_int))
    damage: Damage | None = attrs.field(default=None, validator=optional(checked_type(Damage)))
    notes: tuple[str, ...] = attrs.field(default=(), converter=_notes)

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready values."""
        return _json.to_dict(self)


def tuple_of(items: Iterable[_T], cls: type[_T], what: str) -> tuple[_T, ...]:
    """``items`` as a tuple, each a ``cls``: else an :class:`ArgumentTypeError` naming
    ``what`` (``"KernelTable.rows"``) and the type it got."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ArgumentTypeError(
            f"{what} must be an iterable of {cls.__name__}, got {type(items).__name__}"
        )
    out = tuple(items)
    for item in out:
        if not isinstance(item, cls):
            raise ArgumentTypeError(f"{what} must hold {cls.__name__}, got {type(item).__name__}")
    return out


def _parts_rows(items: Iterable[KernelRow]) -> tuple[KernelRow, ...]:
    return tuple_of(items, KernelRow, "TableParts.rows")


def _parts_excluded(items: Iterable[Exclusion]) -> tuple[Exclusion, ...]:
    return tuple_of(items, Exclusion, "TableParts.excluded")


def _parts_steps(items: Iterable[StepBreakdown]) -> tuple[StepBreakdown, ...]:
    return tuple_of(items, StepBreakdown, "TableParts.steps")


def _parts_sources(items: Iterable[TraceSource]) -> tuple[TraceSource, ...]:
    return tuple_of(items, TraceSource, "TableParts.sources")


@final
@attrs.frozen(kw_only=True)
class TableParts:
    """One reading's parts, before they are a table: what a reader returns, and what
    :meth:`KernelTable.of_parts <probewise.KernelTable.of_parts>` builds a table from
    (a reader of another format returns these too).

    ``rows`` may repeat a ``(name, kind)`` and ``excluded`` a reason (the table sums
    them); ``naive_device_us``, ``steps`` and ``sources`` are as the table's fields.
    """

    rows: tuple[KernelRow, ...] = attrs.field(converter=_parts_rows)
    excluded: tuple[Exclusion, ...] = attrs.field(default=(), converter=_parts_excluded)
    naive_device_us: float | None = attrs.field(default=None, converter=optional_duration)
    steps: tuple[StepBreakdown, ...] = attrs.field(default=(), converter=_parts_steps)
    sources: tuple[TraceSource, ...] = attrs.field(default=(), converter=_parts_sources)
