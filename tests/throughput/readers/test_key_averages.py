"""KernelTable.from_key_averages on real torch profiler objects (no GPU needed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.autograd import DeviceType  # noqa: E402
from torch.autograd.profiler_util import EventList, FunctionEvent  # noqa: E402

from probewise.errors import TraceFormatError  # noqa: E402
from probewise.throughput.kernels import ExclusionReason, KernelKind, KernelTable  # noqa: E402


def test_cpu_profile_of_a_tiny_model_gives_an_empty_table() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    batch = torch.randn(4, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(batch).sum().backward()
    averages = prof.key_averages()
    table = KernelTable.from_key_averages(averages)
    assert table.rows == ()
    assert table.kernel_us == 0.0
    assert table.naive_device_us == 0.0
    cpu = table.exclusion(ExclusionReason.CPU_OP)
    assert cpu.events == sum(1 for avg in averages if not avg.key.startswith(("cuda", "cu")))
    assert cpu.events > 0


def _event(**fields: object) -> FunctionEvent:
    """A real FunctionEvent (stack=[] so that key_averages() can group it)."""
    return FunctionEvent(stack=[], **fields)  # type: ignore[arg-type]


def cuda_like_events() -> EventList:
    """An ATen op that launched two kernels, the kernels themselves, and a GPU annotation."""
    op = _event(id=1, name="aten::mm", thread=0, start_us=0, end_us=200, use_device="cuda")
    op.append_kernel("ampere_sgemm_128x64_tn", 0, 120)
    op.append_kernel("ampere_sgemm_128x64_tn", 0, 30)
    launch = _event(
        id=2, name="cudaLaunchKernel", thread=0, start_us=1, end_us=5, use_device="cuda"
    )
    kernels = [
        _event(
            id=10 + i,
            name="ampere_sgemm_128x64_tn",
            thread=0,
            start_us=10,
            end_us=10 + us,
            device_type=DeviceType.CUDA,
            use_device="cuda",
        )
        for i, us in enumerate((120, 30))
    ]
    copy = _event(
        id=20,
        name="Memcpy HtoD (Pageable -> Device)",
        thread=0,
        start_us=0,
        end_us=8,
        device_type=DeviceType.CUDA,
        use_device="cuda",
    )
    annotation = _event(
        id=30,
        name="forward",
        thread=0,
        start_us=0,
        end_us=500,
        device_type=DeviceType.CUDA,
        use_device="cuda",
        is_user_annotation=True,
    )
    events = EventList([op, launch, *kernels, copy, annotation], use_device="cuda")
    events._build_tree()
    return events


def test_cuda_rows_are_counted_once() -> None:
    averages = cuda_like_events().key_averages()
    table = KernelTable.from_key_averages(averages)
    assert [(r.name, r.calls, r.device_us, r.kind) for r in table.rows] == [
        ("ampere_sgemm_128x64_tn", 2, 150.0, KernelKind.GEMM),
        ("Memcpy HtoD (Pageable -> Device)", 1, 8.0, KernelKind.MEMCPY),
    ]
    assert table.kernel_us == 150.0
    assert table.memcpy_us == 8.0
    # The op repeats its kernels' time; the annotation spans them; summing the column
    # would have said 150 (kernels) + 8 (copy) + 150 (aten::mm again) + 500 (annotation).
    assert table.exclusion(ExclusionReason.CPU_OP).total_us == 150.0
    assert table.exclusion(ExclusionReason.GPU_USER_ANNOTATION).total_us == 500.0
    assert table.exclusion(ExclusionReason.RUNTIME_CALL).events == 1
    assert table.naive_device_us == 808.0


def test_legacy_path_counts_the_op_rows() -> None:
    rows = []
    # (name, start, end, device time of its kernels): disjoint spans, so no nesting
    for index, (name, start, end, device_us) in enumerate(
        [
            ("aten::pow", 0, 2000, 1737),
            ("aten::square", 3000, 3100, 15),
            ("cudaEventRecord", 4000, 4003, 0),
        ]
    ):
        row = _event(
            id=index,
            name=name,
            thread=0,
            start_us=start,
            end_us=end,
            use_device="cuda",
            is_legacy=True,
        )
        if device_us:
            row.append_kernel(name, 0, device_us)
        rows.append(row)
    events = EventList(rows, use_device="cuda")
    events._build_tree()
    table = KernelTable.from_key_averages(events.key_averages())
    assert table.kernel_us == 1752.0
    assert {r.name for r in table.rows} == {"aten::pow", "aten::square"}
    assert table.exclusion(ExclusionReason.RUNTIME_CALL).events == 1


def test_rejects_things_that_are_not_averages() -> None:
    with pytest.raises(TraceFormatError, match="key_averages"):
        KernelTable.from_key_averages([object()])
