"""A timing harness around the caller's own training step.

Nothing here reimplements a step, a loss or a model: every function calls exactly
the callable it is given, as it is, and times it. What it adds is the discipline:

* warm-up calls at each shape before any sample (the first call at a shape pays for
  allocation, autotuning, compilation);
* a synchronised clock: on CUDA ``torch.cuda.synchronize()`` before the clock
  starts and before it stops (queued kernels are otherwise not in the sample); on
  CPU ``time.perf_counter`` alone;
* robust summaries (median, min, max, MAD) rather than a mean one slow call drags;
* no fit from fewer than three lengths, refused *before* anything runs;
* the raw evidence (``save_to=DIR``): every sample, unedited, next to the report,
  so a claim can be re-derived rather than taken on faith.

torch is imported only when a function here runs.
"""

from __future__ import annotations

import enum
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast, final

import attrs

from probewise import _json
from probewise._extras import Extra, requires
from probewise.errors import InsufficientPointsError, InvalidInputError
from probewise.throughput._torch_dtype import TorchDtype
from probewise.throughput.data.ce_chunks import LogitsDtype
from probewise.throughput.kernels import KernelTable
from probewise.throughput.timing.scaling import FitLoss, LossName, ScalingFit, ScalingPoint

if TYPE_CHECKING:
    import torch

__all__ = [
    "Clock",
    "CpuOpRow",
    "KernelCapture",
    "PaddingPenalty",
    "ScalingMeasurement",
    "StepTiming",
    "capture_kernels",
    "measure_scaling",
    "padding_penalty",
    "time_loss",
    "time_step",
]


@enum.unique
class Clock(enum.Enum):
    """How a :class:`StepTiming` was clocked."""

    CUDA_SYNC = "cuda_sync"
    """``torch.cuda.synchronize()`` before starting and before stopping ``perf_counter``."""
    MONOTONIC = "monotonic"
    """``time.perf_counter`` alone (CPU work finishes before the call returns)."""


def _samples(
    _instance: object, _attribute: attrs.Attribute[tuple[float, ...]], value: tuple[float, ...]
) -> None:
    if not value:
        raise InvalidInputError("a timing needs at least one sample")
    if not all(math.isfinite(s) and s >= 0.0 for s in value):
        raise InvalidInputError("samples must be finite seconds >= 0")


def _to_samples(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@_json.shaped(
    _json.Shape(
        after={
            "label": None,
            "clock": "label",
            "warmup": "clock",
            "median": "samples",
            "min": "median",
            "max": "min",
            "mad": "max",
        }
    )
)
@final
@attrs.frozen(kw_only=True)
class StepTiming:
    """Timed calls of one step: the samples, in call order, and their summary."""

    samples: tuple[float, ...] = attrs.field(converter=_to_samples, validator=_samples)
    warmup: int
    """Untimed calls made first."""
    clock: Clock
    label: str = ""
    """What was timed (a length, "padded", ...), for reports and saved evidence."""

    @property
    def repeats(self) -> int:
        """Timed calls."""
        return len(self.samples)

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        """Fastest call."""
        return min(self.samples)

    @property
    def max(self) -> float:
        """Slowest call."""
        return max(self.samples)

    @property
    def mad(self) -> float:
        """Median absolute deviation from the median (unscaled)."""
        centre = self.median
        return statistics.median(abs(s - centre) for s in self.samples)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict with every sample."""
        return _json.to_dict(self)


def _clock(sync: bool | None) -> tuple[Clock, Callable[[], None]]:
    with requires(Extra.TORCH, "the timing harness"):
        import torch

    cuda = torch.cuda.is_available()
    if sync is True and not cuda:
        raise InvalidInputError("sync=True needs CUDA, and none is available")
    if cuda and sync is not False:
        return Clock.CUDA_SYNC, torch.cuda.synchronize
    return Clock.MONOTONIC, lambda: None


def _timed(step: Callable[[], object], synchronise: Callable[[], None]) -> float:
    """Seconds one call of ``step`` takes, the device synchronised on both sides."""
    synchronise()
    start = time.perf_counter()
    step()
    synchronise()
    return time.perf_counter() - start


def _check_counts(warmup: int, repeats: int) -> None:
    if warmup < 0:
        raise InvalidInputError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise InvalidInputError(f"repeats must be >= 1, got {repeats}")


def _save(save_to: str | Path | None, name: str, document: dict[str, object]) -> None:
    if save_to is None:
        return
    folder = Path(save_to)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(
        json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )


def time_step(
    step: Callable[[], object],
    *,
    warmup: int = 1,
    repeats: int = 5,
    sync: bool | None = None,
    label: str = "",
    save_to: str | Path | None = None,
) -> StepTiming:
    """Call ``step()`` ``warmup`` times untimed, then ``repeats`` times timed.

    Args:
        step: the caller's step, called with no arguments, exactly as given.
        warmup: untimed calls first.
        repeats: timed calls.
        sync: ``None`` synchronises CUDA when it is available; ``True`` requires it;
            ``False`` never synchronises (timing only the launch on a GPU).
        label: a name for the timing in reports and saved files.
        save_to: a folder to write ``timing.json`` (every sample) into.

    Raises:
        InvalidInputError: bad counts, or ``sync=True`` without CUDA. Errors raised
            by ``step`` propagate unchanged.
    """
    _check_counts(warmup, repeats)
    clock, synchronise = _clock(sync)
    for _ in range(warmup):
        step()
    samples = [_timed(step, synchronise) for _ in range(repeats)]
    timing = StepTiming(samples=tuple(samples), warmup=warmup, clock=clock, label=label)
    _save(save_to, "timing.json", timing.to_dict())
    return timing


@_json.shaped(_json.Shape(omit={"points"}))
@final
@attrs.frozen(kw_only=True)
class ScalingMeasurement:
    """Timings at each length and the three-term fit made from them."""

    batch: int
    timings: tuple[StepTiming, ...]
    """One per length, in the order run (``label`` is the length)."""
    points: tuple[ScalingPoint, ...]
    """Every sample as a point (repeats steady the fit)."""
    fit: ScalingFit

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict: the fit and every sample."""
        return _json.to_dict(self)


def measure_scaling(
    step_for_length: Callable[[int], Callable[[], object]],
    lengths: Sequence[int],
    *,
    batch: int = 1,
    warmup: int = 1,
    repeats: int = 3,
    sync: bool | None = None,
    loss: FitLoss | LossName = FitLoss.LINEAR,
    save_to: str | Path | None = None,
) -> ScalingMeasurement:
    """Time the step at each length (warm-up per length), then fit the three terms.

    ``step_for_length(length)`` returns the step to time at that length (e.g. a
    closure over a batch of that shape); it is called once per length and its
    result is called ``warmup + repeats`` times.

    Raises:
        InsufficientPointsError: fewer than three distinct lengths, before running
            anything.
        InvalidInputError: bad lengths, batch or counts.
    """
    distinct = sorted(set(lengths))
    if len(distinct) < 3:
        shown = ", ".join(str(x) for x in distinct)
        raise InsufficientPointsError(
            f"measure_scaling needs at least three distinct lengths, got {len(distinct)}"
            f"{f' ({shown})' if shown else ''}: nothing was run. The fit has three terms "
            "(quadratic, linear, fixed); through two lengths any split fits exactly"
        )
    if any(isinstance(x, bool) or x < 1 for x in distinct):
        raise InvalidInputError(f"lengths must be positive ints, got {list(lengths)}")
    if batch < 1:
        raise InvalidInputError(f"batch must be >= 1, got {batch}")
    _check_counts(warmup, repeats)
    timings: list[StepTiming] = []
    points: list[ScalingPoint] = []
    for length in lengths:
        step = step_for_length(length)
        timing = time_step(step, warmup=warmup, repeats=repeats, sync=sync, label=str(length))
        timings.append(timing)
        points.extend(ScalingPoint(length, max(s, 1e-12), batch) for s in timing.samples)
    result = ScalingMeasurement(
        batch=batch,
        timings=tuple(timings),
        points=tuple(points),
        fit=ScalingFit.fit(points, loss=loss),
    )
    _save(save_to, "scaling.json", result.to_dict())
    if save_to is not None:
        rows = "".join(f"{p.length},{p.seconds!r},{p.batch}\n" for p in points)
        (Path(save_to) / "points.csv").write_text("length,seconds,batch\n" + rows, encoding="utf-8")
    return result


@_json.shaped(_json.Shape(after={"ratio": None, "ratio_low": "ratio", "ratio_high": "ratio_low"}))
@final
@attrs.frozen(kw_only=True)
class PaddingPenalty:
    """The same real tokens run padded against unpadded (or packed).

    ``ratio`` is the padded median over the unpadded median: the factor padding
    costs. ``ratio_low`` / ``ratio_high`` bound it from the extremes
    (fastest padded over slowest unpadded, and the reverse).
    """

    padded: StepTiming
    unpadded: StepTiming

    @property
    def ratio(self) -> float:
        """Padded median over unpadded median."""
        return self.padded.median / self.unpadded.median if self.unpadded.median else math.inf

    @property
    def ratio_low(self) -> float:
        """Fastest padded over slowest unpadded."""
        return self.padded.min / self.unpadded.max if self.unpadded.max else math.inf

    @property
    def ratio_high(self) -> float:
        """Slowest padded over fastest unpadded."""
        return self.padded.max / self.unpadded.min if self.unpadded.min else math.inf

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict with every sample."""
        return _json.to_dict(self)


def padding_penalty(
    padded_step: Callable[[], object],
    unpadded_step: Callable[[], object],
    *,
    warmup: int = 1,
    repeats: int = 5,
    sync: bool | None = None,
    save_to: str | Path | None = None,
) -> PaddingPenalty:
    """Time the same real tokens padded and unpadded, calls interleaved.

    Both steps are warmed up, then timed alternately (padded, unpadded, padded, ...)
    so that drift (thermal, another process) falls on both alike.
    """
    _check_counts(warmup, repeats)
    clock, synchronise = _clock(sync)
    for _ in range(warmup):
        padded_step()
        unpadded_step()
    padded: list[float] = []
    unpadded: list[float] = []
    for _ in range(repeats):
        padded.append(_timed(padded_step, synchronise))
        unpadded.append(_timed(unpadded_step, synchronise))
    result = PaddingPenalty(
        padded=StepTiming(samples=tuple(padded), warmup=warmup, clock=clock, label="padded"),
        unpadded=StepTiming(samples=tuple(unpadded), warmup=warmup, clock=clock, label="unpadded"),
    )
    _save(save_to, "padding_penalty.json", result.to_dict())
    return result


def time_loss(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    vocab_size: int,
    tokens: int,
    batch: int = 1,
    logits_dtype: LogitsDtype | str | TorchDtype = LogitsDtype.BFLOAT16,
    device: str = "cpu",
    backward: bool = True,
    warmup: int = 1,
    repeats: int = 5,
    seed: int = 0,
    save_to: str | Path | None = None,
) -> StepTiming:
    """Wall clock of the caller's loss (and its backward) on random logits.

    ``loss_fn(logits, labels)`` gets logits of shape ``(batch, tokens, vocab_size)``
    in ``logits_dtype`` on ``device`` (a leaf that requires grad) and int64 labels;
    it must return a scalar tensor. The logits' gradient is dropped between calls.
    """
    with requires(Extra.TORCH, "time_loss"):
        import torch

    for name, value in (("vocab_size", vocab_size), ("tokens", tokens), ("batch", batch)):
        if value < 1:
            raise InvalidInputError(f"{name} must be >= 1, got {value}")
    from probewise.throughput._torch_logits import random_logits

    dtype = LogitsDtype.parse(logits_dtype)
    logits, labels = random_logits(
        (batch, tokens, vocab_size), dtype, seed=seed, device=device, requires_grad=backward
    )

    def step() -> None:
        loss = cast("object", loss_fn(logits, labels))  # typed a tensor; a caller's may not be
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise InvalidInputError("loss_fn must return a scalar tensor")
        if backward:
            torch.autograd.backward(loss)
            logits.grad = None

    return time_step(
        step,
        warmup=warmup,
        repeats=repeats,
        sync=None if device.startswith("cuda") else False,
        label=f"loss {batch}x{tokens}x{vocab_size} {dtype.value}",
        save_to=save_to,
    )


@final
@attrs.frozen(kw_only=True)
class CpuOpRow:
    """One row of the profiler's CPU op table (``key_averages()``), in microseconds."""

    name: str
    calls: int
    cpu_total_us: float
    self_cpu_us: float

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return _json.to_dict(self)


@final
@attrs.frozen(kw_only=True)
class KernelCapture:
    """What ``torch.profiler`` saw around ``steps`` calls of the caller's step.

    ``kernels`` sums device kernel rows only (empty on CPU: no device, no kernels,
    not an error); ``cpu_ops`` is the CPU op table, by self CPU time, descending.
    """

    steps: int
    warmup: int
    kernels: KernelTable
    cpu_ops: tuple[CpuOpRow, ...]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return _json.to_dict(self)


def _cpu_ops(events: Iterable[object]) -> tuple[CpuOpRow, ...]:
    """The boundary: profiler ``FunctionEventAvg`` objects to typed rows."""
    rows: list[CpuOpRow] = []
    for event in events:
        name = getattr(event, "key", None)
        calls = getattr(event, "count", None)
        total = getattr(event, "cpu_time_total", None)
        own = getattr(event, "self_cpu_time_total", None)
        if not isinstance(name, str) or not isinstance(calls, int):
            continue
        if not isinstance(total, int | float) or not isinstance(own, int | float):
            continue
        if own <= 0 and total <= 0:
            continue  # device-only rows (kernels) have no CPU time
        rows.append(
            CpuOpRow(name=name, calls=calls, cpu_total_us=float(total), self_cpu_us=float(own))
        )
    rows.sort(key=lambda r: (-r.self_cpu_us, r.name))
    return tuple(rows)


def capture_kernels(
    step: Callable[[], object],
    *,
    steps: int = 1,
    warmup: int = 1,
    row_limit: int = 100,
    save_to: str | Path | None = None,
) -> KernelCapture:
    """Run ``torch.profiler`` around ``steps`` calls of ``step`` (after ``warmup`` calls).

    Profiles CPU, and CUDA when it is available. With ``save_to=DIR`` it writes the
    raw evidence, unedited: ``trace.json`` (the Chrome trace), ``key_averages.txt``
    (the printed table, ``row_limit`` rows) and ``capture.json``; reading
    ``trace.json`` back with :meth:`KernelTable.from_chrome_trace` gives the same
    kernel rows and totals as the returned table.
    """
    with requires(Extra.TORCH, "capture_kernels"):
        import torch
        from torch.profiler import ProfilerActivity, profile

    if steps < 1:
        raise InvalidInputError(f"steps must be >= 1, got {steps}")
    _check_counts(warmup, 1)
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    events = cast("Iterable[object]", prof.key_averages())
    capture = KernelCapture(
        steps=steps,
        warmup=warmup,
        kernels=KernelTable.from_key_averages(events),
        cpu_ops=_cpu_ops(events),
    )
    if save_to is not None:
        folder = Path(save_to)
        folder.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(folder / "trace.json"))
        sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        printed = prof.key_averages().table(  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            sort_by=sort_by, row_limit=row_limit
        )
        (folder / "key_averages.txt").write_text(str(printed) + "\n", encoding="utf-8")  # pyright: ignore[reportUnknownArgumentType]
        _save(folder, "capture.json", capture.to_dict())
    return capture
