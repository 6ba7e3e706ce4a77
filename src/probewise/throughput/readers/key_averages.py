"""A live ``prof.key_averages()`` (an ``EventList`` of ``FunctionEventAvg``) into a table's parts.

Only the attributes read here are touched (``key``, ``count``, ``self_device_time_total``
or ``self_cuda_time_total``, ``device_type``, ``is_legacy``, ``is_user_annotation``), so
torch is never imported: any object with them will do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, final

import attrs
import regex

from probewise.errors import TraceFormatError
from probewise.throughput._kernel_rows import Exclusion, ExclusionReason, KernelRow, TableParts

__all__ = ["read_key_averages"]


def read_key_averages(events: Iterable[object]) -> TableParts:
    """The parts of a table from ``prof.key_averages()`` (``FunctionEventAvg`` objects).

    Kernel rows are the device rows: ``device_type`` other than CPU (CUDA, XPU,
    MTIA, PrivateUse1...), user annotations left out. On the legacy profiler path
    (``is_legacy``: CUDA-event timing, no kernel rows) the CPU op rows carry the
    device time, so they are the rows. ``naive_device_us`` is the sum of self
    device time over every row: what summing the column would have said.
    """
    items = list(events)
    converted = [_averaged(item) for item in items]
    legacy = any(c.legacy for c in converted) and not any(c.on_device for c in converted)
    rows: list[KernelRow] = []
    excluded: list[Exclusion] = []
    naive = 0
    for c in converted:
        naive += c.self_ns
        if c.annotation:
            reason = ExclusionReason.GPU_USER_ANNOTATION if c.on_device else ExclusionReason.CPU_OP
            excluded.append(Exclusion(reason=reason, events=1, total_us=c.self_ns / 1000))
        elif c.on_device or (legacy and c.self_ns > 0):
            rows.append(KernelRow.named(c.name, calls=c.calls, device_us=c.self_ns / 1000))
        elif _RUNTIME_NAME.match(c.name):
            excluded.append(
                Exclusion(reason=ExclusionReason.RUNTIME_CALL, events=1, total_us=c.self_ns / 1000)
            )
        else:
            excluded.append(
                Exclusion(reason=ExclusionReason.CPU_OP, events=1, total_us=c.self_ns / 1000)
            )
    return TableParts(rows=tuple(rows), excluded=tuple(excluded), naive_device_us=naive / 1000)


_RUNTIME_NAME: Final = regex.compile(r"(?:cuda|cu|hip|hsa|mtia|xpu|ze|ur)[A-Z]")


@final
@attrs.frozen(kw_only=True)
class _Averaged:
    name: str
    calls: int
    self_ns: int
    on_device: bool
    legacy: bool
    annotation: bool


def _averaged(item: object) -> _Averaged:
    name = getattr(item, "key", None)
    if not isinstance(name, str) or not name:
        raise TraceFormatError(
            f"not a key_averages() event: {type(item).__name__} has no string 'key'"
        )
    count = getattr(item, "count", 0)
    self_us = getattr(item, "self_device_time_total", None)
    if self_us is None:
        self_us = getattr(item, "self_cuda_time_total", 0.0)
    if isinstance(self_us, bool) or not isinstance(self_us, int | float) or self_us < 0:
        raise TraceFormatError(f"{name!r} has no usable self device time ({self_us!r})")
    device_type = getattr(item, "device_type", None)
    device_name = getattr(device_type, "name", "CPU")
    return _Averaged(
        name=name,
        calls=count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0,
        self_ns=round(float(self_us) * 1000),
        on_device=isinstance(device_name, str) and device_name != "CPU",
        legacy=getattr(item, "is_legacy", False) is True,
        annotation=getattr(item, "is_user_annotation", False) is True,
    )
