"""What each printed row is: a kernel, an op, an annotation, or ambiguous, and why.

The rules, in the order they are tried, are specified in docs/reference/profiler-table.md
("Labelling rules"); each :class:`Verdict` names the rule that gave it.
"""

from __future__ import annotations

import enum
import re
from typing import Final, assert_never, final

import attrs

from probewise.throughput._kernel_rows import ExclusionReason
from probewise.throughput.readers._table_rows import Parsed

__all__ = [
    "RowLabel",
    "Verdict",
    "exclusion_reason",
    "is_annotation_shape",
    "label_cpu_only",
    "label_inclusive",
    "label_modern",
    "reason_suffix",
]


@enum.unique
class RowLabel(enum.Enum):
    """What a printed row is (the rules: docs/reference/profiler-table.md, "Labelling rules")."""

    KERNEL = "kernel"
    """A device row: a kernel, a copy or a fill. Counted."""
    OP = "op"
    """A host-side op or runtime call; its self device time repeats its kernels'."""
    ANNOTATION = "annotation"
    """A range (``record_function``, ``ProfilerStep#N``) or its span on the device timeline."""
    AMBIGUOUS = "ambiguous"
    """Device time the rules cannot attribute; reported, never counted."""


_RUNTIME: Final = re.compile(
    r"(?:cuda|cu|hip|hsa|mtia|xpu|ze|ur|cudnn|cublas|cublasLt|cupti|nvtx|sycl)[A-Z]\w*", re.ASCII
)
_MEMORY_OP: Final = re.compile(r"Mem(?:cpy|set)", re.IGNORECASE)
_ANNOTATION: Final = re.compile(
    r"ProfilerStep[#*]|Optimizer\.|enumerate\(DataLoader\)|nn\.Module: "
    r"|autograd::engine::evaluate_function: |<built-in |\S+\.py\(\d+\): "
    r"|(?:nccl|gloo|mpi|ucc|xccl):\w|record_param_comms$|Torch-Compiled Region"
    r"|CompiledFunction|## .* ##$"
)
_OP_NAMESPACE: Final = re.compile(
    r"(aten|c10d|_c10d_functional|c10d_functional|_dtensor|torch|autograd|prim|prims|profiler"
    r"|quantized|_quantized|inductor|_inductor|fbgemm|torchvision|torchaudio|mkldnn|onednn"
    r"|xla|higher_order|_higher_order_ops|sparse|_sparse|_nested)::"
)
_QUALIFIED_OP: Final = re.compile(r"([A-Za-z_]\w*)(?:::[A-Za-z_]\w*)*::[A-Za-z_][\w.]*", re.ASCII)
_VOID: Final = re.compile(r"void\s")
_SIGNATURE: Final = re.compile(r"[<(]")
_KERNEL_WORD: Final = re.compile(
    r"kernel|gem[mv]|cutlass|cublas|cudnn|xmma|cijk_|nccl|rccl|elementwise|vectorized"
    r"|^(?:ampere|volta|turing|hopper|blackwell|maxwell|pascal|sm\d+|triton|fmha|flash)_?",
    re.IGNORECASE,
)


@final
@attrs.frozen
class Verdict:
    label: RowLabel
    reason: str
    runtime: bool = False


def is_annotation_shape(row: Parsed) -> bool:
    sd, dt = row.self_device, row.device_total
    return sd is not None and dt is not None and sd.ns == 0 and dt.ns > 0


def _label_kernel_named(row: Parsed, why: str) -> Verdict:
    sd, dt = row.self_device, row.device_total
    host = row.host_time
    self_ns = 0 if sd is None else sd.ns
    if dt is not None and dt.ns < self_ns:
        return Verdict(
            RowLabel.AMBIGUOUS, f"{why}, but its device total is below its self device time"
        )
    below = dt is not None and dt.ns > self_ns
    if self_ns == 0 and (below or host is True):
        return Verdict(
            RowLabel.ANNOTATION,
            f"{why}, but with no self device time and "
            + ("device time below it" if below else "host time")
            + ": a host-side range named after its kernel",
        )
    if below:
        return Verdict(RowLabel.AMBIGUOUS, f"{why}, but its device total exceeds its self time")
    if host is True:
        return Verdict(RowLabel.AMBIGUOUS, f"{why}, but it also spent host time")
    return Verdict(RowLabel.KERNEL, why)


def label_modern(row: Parsed, host_ranges: frozenset[str]) -> Verdict:
    name = row.name
    sd, dt = row.self_device, row.device_total
    if (sd is not None and sd.ns < 0) or (dt is not None and dt.ns < 0):
        return Verdict(RowLabel.AMBIGUOUS, "negative device time: a profiler accounting artefact")
    self_ns = 0 if sd is None else sd.ns
    if _RUNTIME.fullmatch(name) is not None:
        if self_ns > 0:
            return Verdict(
                RowLabel.AMBIGUOUS, "runtime/driver API name, but it carries self device time"
            )
        return Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True)
    if _MEMORY_OP.match(name) is not None:
        return _label_kernel_named(row, "Memcpy/Memset: a device copy or fill")
    if _ANNOTATION.match(name) is not None:
        return Verdict(
            RowLabel.ANNOTATION,
            "annotation name (ProfilerStep#, Optimizer., record_function-style range)",
        )
    namespace = _OP_NAMESPACE.match(name)
    if namespace is not None:
        return Verdict(RowLabel.OP, f"{namespace.group(1)}:: namespace: an op")
    qualified = _QUALIFIED_OP.fullmatch(name)
    if qualified is not None:
        return Verdict(
            RowLabel.OP, f"{qualified.group(1)}::name without a signature: a registered op"
        )
    if _VOID.match(name) is not None:
        return _label_kernel_named(row, "'void ...' signature: a kernel")
    if _SIGNATURE.search(name) is not None:
        return _label_kernel_named(row, "template arguments or parameter list: a kernel signature")
    word = _KERNEL_WORD.search(name)
    if word is not None:
        return _label_kernel_named(row, f"kernel-library name ({word.group(0).rstrip('_')!r})")
    if self_ns > 0 and name in host_ranges:
        return Verdict(
            RowLabel.ANNOTATION,
            "same name as a host-side range in this table: its span on the device timeline",
        )
    return _label_by_shape(row)


def _label_by_shape(row: Parsed) -> Verdict:
    sd, dt = row.self_device, row.device_total
    host = row.host_time
    self_ns = 0 if sd is None else sd.ns
    if dt is None:
        if self_ns == 0:
            return Verdict(RowLabel.OP, "no self device time: host-side")
        if host is False:
            return Verdict(RowLabel.KERNEL, "self device time and no host time: a device row")
        return Verdict(
            RowLabel.AMBIGUOUS,
            "self device time, but no device-total column to tell a kernel from an op "
            "and a name that does not say",
        )
    if dt.ns == 0 and self_ns == 0:
        return Verdict(RowLabel.OP, "no device time and no namespace: host-side")
    if self_ns == 0:
        return Verdict(
            RowLabel.ANNOTATION,
            "no self device time but device time below it: a host-side range (record_function)",
        )
    if dt.ns == self_ns:
        if host is True:
            return Verdict(
                RowLabel.AMBIGUOUS,
                "self device time equals its device total, but it also spent host time "
                "and has no namespace: a host op or a kernel",
            )
        return Verdict(RowLabel.KERNEL, "leaf device row: self device time equals device total")
    if dt.ns > self_ns:
        return Verdict(RowLabel.AMBIGUOUS, "device time of its own and below it, and no namespace")
    return Verdict(RowLabel.AMBIGUOUS, "device total below its self device time")


def label_inclusive(row: Parsed) -> tuple[Verdict, bool]:
    """Pre-2020 rows: the label and whether the row counts (a leaf op with device time)."""
    name = row.name
    dt = row.device_total
    total_ns = 0 if dt is None else dt.ns
    if total_ns < 0:
        return (
            Verdict(RowLabel.AMBIGUOUS, "negative device time: a profiler accounting artefact"),
            False,
        )
    if _RUNTIME.fullmatch(name) is not None:
        if total_ns > 0:
            return (
                Verdict(RowLabel.AMBIGUOUS, "runtime/driver API name, but it carries device time"),
                False,
            )
        return Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True), False
    label = RowLabel.ANNOTATION if _ANNOTATION.match(name) is not None else RowLabel.OP
    what = "a range" if label is RowLabel.ANNOTATION else "an op"
    if total_ns == 0:
        return Verdict(label, f"pre-2020 table: {what} with no device time"), False
    if row.self_cpu is None or row.cpu_total is None:
        return (
            Verdict(
                RowLabel.AMBIGUOUS,
                "pre-2020 table without self CPU columns: cannot tell a leaf op from a parent",
            ),
            False,
        )
    if row.self_cpu.ns == row.cpu_total.ns:
        return (
            Verdict(
                label,
                f"pre-2020 table: {what} with nothing below it (self CPU equals CPU total), "
                "so its device total is its own device time",
            ),
            True,
        )
    return (
        Verdict(
            label,
            f"pre-2020 table: {what} with ops below it (self CPU below CPU total), "
            "so its device total includes theirs",
        ),
        False,
    )


def label_cpu_only(row: Parsed) -> Verdict:
    if _RUNTIME.fullmatch(row.name) is not None:
        return Verdict(RowLabel.OP, "runtime/driver API call: host-side", runtime=True)
    if _ANNOTATION.match(row.name) is not None:
        return Verdict(RowLabel.ANNOTATION, "annotation name on a CPU-only table")
    return Verdict(RowLabel.OP, "CPU-only table: a host-side op")


def exclusion_reason(verdict: Verdict, device_ns: int) -> ExclusionReason:
    match verdict.label:
        case RowLabel.OP:
            return ExclusionReason.RUNTIME_CALL if verdict.runtime else ExclusionReason.CPU_OP
        case RowLabel.ANNOTATION:
            return ExclusionReason.GPU_USER_ANNOTATION if device_ns > 0 else ExclusionReason.CPU_OP
        case RowLabel.AMBIGUOUS:
            return ExclusionReason.OTHER
        case RowLabel.KERNEL:
            raise AssertionError(
                "KERNEL rows are counted, never excluded"
            )  # internal: callers pass only excluded labels
        case _ as unreachable:
            assert_never(unreachable)


def reason_suffix(label: RowLabel, *, counted: bool, legacy: bool, device_ns: int) -> str:
    """What the row's time does, appended to the reason."""
    match label:
        case RowLabel.KERNEL:
            return ""
        case RowLabel.OP | RowLabel.ANNOTATION | RowLabel.AMBIGUOUS:
            if counted:
                return "; legacy table: its self device time is its own, so it is counted"
            if device_ns <= 0:
                return ""
            if label is RowLabel.OP:
                return "; excluded: " + (
                    "its device time includes its children's"
                    if legacy
                    else "its self device time repeats its kernels'"
                )
            if label is RowLabel.ANNOTATION:
                return "; excluded: its device time spans kernels counted elsewhere"
            return "; not counted"
        case _ as unreachable:
            assert_never(unreachable)
