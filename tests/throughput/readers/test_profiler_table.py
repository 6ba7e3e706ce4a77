"""read_profiler_table(s): printed key_averages() tables back into KernelTables."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise.errors import DamageKind, TraceFormatError
from probewise.throughput.kernels import ExclusionReason, KernelKind, KernelTable
from probewise.throughput.readers.profiler_table import LabelledRow, RowLabel, decode_table_bytes
from probewise.throughput.table_readings import (
    ProfilerTableReading,
    read_profiler_table,
    read_profiler_tables,
)

if TYPE_CHECKING:
    from torch.autograd.profiler_util import EventList

MODERN = [
    "Name",
    "Self CPU %",
    "Self CPU",
    "CPU total %",
    "CPU total",
    "CPU time avg",
    "Self CUDA",
    "Self CUDA %",
    "CUDA total",
    "CUDA time avg",
    "# of Calls",
]
IM2COL = "void at::native::im2col_kernel<float>(long, float co..."


# --------------------------------------------------------------------------- helpers


def fmt_time(us: float, unit: str | None = None) -> str:
    """What torch's _format_time / override_time_unit print."""
    if unit == "s" or (unit is None and us >= 1e6):
        return f"{us / 1e6:.3f}s"
    if unit == "ms" or (unit is None and us >= 1e3):
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def display(name: str, width: int = 55) -> str:
    """The name as table() shows it (cut to width - 3 characters plus '...')."""
    return name[: width - 3] + "..." if len(name) >= width - 3 else name


def render(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    footer: Sequence[str] = (),
    name_width: int | None = None,
    width: int = 12,
    align: str = ">",
    closing: bool = True,
) -> str:
    """A table laid out as torch lays it out: padded columns, two-space gaps, dashes."""
    names = [str(row[0]) for row in rows]
    name_w = name_width or min(max(len(n) for n in [*names, "Name"]) + 4, 55)
    widths = [name_w] + [width] * (len(header) - 1)

    def line(cells: Sequence[object]) -> str:
        return "".join(f"{cell!s:{align}{w}}  " for cell, w in zip(cells, widths, strict=True))

    sep = "".join("-" * w + "  " for w in widths)
    out = [sep, line(header), sep, *(line(row) for row in rows)]
    if closing:
        out.append(sep)
    out.extend(footer)
    return "\n".join(out) + "\n"


def modern_row(
    name: str,
    *,
    self_cpu: float,
    cpu_total: float,
    self_dev: float,
    dev_total: float,
    calls: int,
    unit: str | None = None,
) -> list[object]:
    return [
        display(name),
        "1.00%",
        fmt_time(self_cpu, unit),
        "1.00%",
        fmt_time(cpu_total, unit),
        fmt_time(cpu_total / max(calls, 1), unit),
        fmt_time(self_dev, unit),
        "1.00%",
        fmt_time(dev_total, unit),
        fmt_time(dev_total / max(calls, 1), unit),
        calls,
    ]


def kernel(name: str, us: float, calls: int = 1, unit: str | None = None) -> list[object]:
    return modern_row(
        name, self_cpu=0, cpu_total=0, self_dev=us, dev_total=us, calls=calls, unit=unit
    )


def op(
    name: str, self_dev: float, dev_total: float, cpu: float = 10.0, unit: str | None = None
) -> list[object]:
    return modern_row(
        name,
        self_cpu=cpu,
        cpu_total=cpu * 2,
        self_dev=self_dev,
        dev_total=dev_total,
        calls=1,
        unit=unit,
    )


def by_name(reading: ProfilerTableReading) -> dict[str, LabelledRow]:
    return {row.name: row for row in reading.rows}


def check_invariants(reading: ProfilerTableReading) -> None:
    assert reading.kernel_sum_us == reading.table.device_us
    assert all(row.counted for row in reading.rows if row.label is RowLabel.KERNEL)
    if reading.reconciled:
        assert reading.hidden_device_us == 0.0
    if reading.footer_self_device_us is None:
        assert reading.hidden_device_us is None
        assert not reading.reconciled
    counted_ns = 0
    for row in reading.rows:
        if row.counted:
            value = row.self_device_us if row.self_device_us is not None else row.device_total_us
            assert value is not None
            counted_ns += round(value * 1000)
    assert counted_ns == round(reading.table.device_us * 1000)


# --------------------------------------------------------------------------- real fixtures


def fixture_text(shared_fixtures: Path, name: str) -> str:
    return (shared_fixtures / "profiler_tables" / name).read_text(encoding="utf-8")


def test_legacy_fixture_counts_the_op_rows(shared_fixtures: Path) -> None:
    reading = read_profiler_table(fixture_text(shared_fixtures, "legacy_cuda_event_timing.txt"))
    assert reading.legacy
    assert reading.device == "CUDA"
    assert reading.table.kernel_us == 1763.0
    assert {row.name: row.device_us for row in reading.table.rows} == {
        "aten::pow": 1737.0,
        "aten::square": 15.0,
        "aten::result_type": 6.0,
        "aten::to": 5.0,
    }
    assert reading.footer_self_device_us == 1763.0
    assert reading.footer_self_cpu_us == 1720.0
    assert reading.reconciled
    assert reading.hidden_device_us == 0.0
    assert reading.table.naive_device_us == 1763.0
    rows = by_name(reading)
    assert rows["aten::pow"].label is RowLabel.OP
    assert rows["aten::pow"].counted
    assert rows["aten::pow"].calls == 1
    assert "legacy" in rows["aten::pow"].reason
    for runtime in ("cudaEventRecord", "cudaLaunchKernel", "cudaDeviceSynchronize"):
        assert rows[runtime].label is RowLabel.OP
        assert not rows[runtime].counted
    assert rows["cudaEventRecord"].calls == 8
    assert reading.table.exclusion(ExclusionReason.RUNTIME_CALL).events == 3
    assert [row.name for row in reading.rows][:2] == ["aten::square", "aten::pow"]
    assert any("legacy" in note for note in reading.notes)
    check_invariants(reading)


def test_legacy_fixture_through_kernel_table(shared_fixtures: Path) -> None:
    text = fixture_text(shared_fixtures, "legacy_cuda_event_timing.txt")
    assert KernelTable.from_profiler_table(text) == read_profiler_table(text).table


def test_tutorial_fixture_holds_two_tables(shared_fixtures: Path) -> None:
    text = fixture_text(shared_fixtures, "tutorial_partial_cuda_and_xpu.txt")
    cuda, xpu = read_profiler_tables(text)

    assert cuda.device == "CUDA"
    assert cuda.columns == ("Name", "Self CUDA", "CUDA total")
    assert not cuda.legacy
    assert [(r.name, r.device_us, r.calls) for r in cuda.table.rows] == [
        (IM2COL, 3844.0, None),
        ("sgemm_32x32x32_NN", 3206.0, None),
        ("sgemm_32x32x32_NN_vec", 3093.0, None),
    ]
    assert cuda.table.kernel_us == 10143.0
    assert cuda.kernel_sum_us == 10143.0
    rows = by_name(cuda)
    assert rows[IM2COL].truncated
    assert cuda.possible_collisions == (IM2COL,)
    assert rows["aten::thnn_conv2d_forward"].label is RowLabel.OP
    assert not rows["aten::thnn_conv2d_forward"].counted
    assert rows["aten::thnn_conv2d_forward"].self_device_us == 10484.0
    assert rows["model_inference"].label is RowLabel.ANNOTATION
    assert rows["model_inference"].device_total_us == 11666.0
    assert cuda.table.exclusion(ExclusionReason.CPU_OP).total_us == 10484.0
    assert cuda.footer_self_device_us == 11666.0
    assert cuda.footer_self_cpu_us == 23015.0
    assert cuda.hidden_device_us == 1523.0
    assert not cuda.reconciled
    assert cuda.table.naive_device_us == 10484.0 + 10143.0

    assert xpu.device == "XPU"
    assert not xpu.legacy
    assert {(r.name, r.device_us, r.calls) for r in xpu.table.rows} == {
        ("gen_conv", 1484.0, 20),
        ("conv_reorder", 386.88, 60),
    }
    rows = by_name(xpu)
    assert rows["aten::convolution_overrideable"].label is RowLabel.OP
    assert rows["aten::native_batch_norm"].label is RowLabel.OP
    assert rows["model_inference"].label is RowLabel.ANNOTATION
    assert xpu.footer_self_device_us == 2567.0
    assert xpu.hidden_device_us == 696.12
    assert xpu.possible_collisions == ()
    assert xpu.offset > cuda.offset
    assert text[xpu.offset :].startswith("-----")
    for reading in (cuda, xpu):
        check_invariants(reading)


def test_read_profiler_table_rejects_two_tables(shared_fixtures: Path) -> None:
    text = fixture_text(shared_fixtures, "tutorial_partial_cuda_and_xpu.txt")
    second = read_profiler_tables(text)[1].offset
    with pytest.raises(TraceFormatError, match="read_profiler_tables") as caught:
        read_profiler_table(text)
    assert caught.value.offset == second


def test_crlf_and_trailing_spaces_read_the_same(shared_fixtures: Path) -> None:
    text = fixture_text(shared_fixtures, "tutorial_partial_cuda_and_xpu.txt")
    messy = "\r\n".join(line + "   " for line in text.split("\n"))
    for plain, crlf in zip(read_profiler_tables(text), read_profiler_tables(messy), strict=True):
        assert plain.table == crlf.table
        assert plain.rows == crlf.rows
        assert plain.notes == crlf.notes


# --------------------------------------------------------------------------- dialects


def test_modern_full_table_with_copies_fills_runtime_and_annotations() -> None:
    rows = [
        modern_row(
            "ProfilerStep#3", self_cpu=50, cpu_total=900, self_dev=700, dev_total=700, calls=1
        ),
        op("aten::mm", 150, 150),
        kernel("ampere_sgemm_128x64_tn", 150, calls=2),
        kernel("Memcpy HtoD (Pageable -> Device)", 8),
        kernel("Memset (Device)", 2),
        op("cudaLaunchKernel", 0, 0, cpu=4),
        modern_row("record_param_comms", self_cpu=1, cpu_total=3, self_dev=0, dev_total=0, calls=1),
    ]
    text = render(
        MODERN, rows, footer=["Self CPU time total: 1.000ms", "Self CUDA time total: 160.000us"]
    )
    reading = read_profiler_table(text)
    assert {(r.name, r.kind) for r in reading.table.rows} == {
        ("ampere_sgemm_128x64_tn", KernelKind.GEMM),
        ("Memcpy HtoD (Pageable -> Device)", KernelKind.MEMCPY),
        ("Memset (Device)", KernelKind.MEMSET),
    }
    assert reading.table.kernel_us == 150.0
    assert reading.table.memcpy_us == 8.0
    assert reading.table.memset_us == 2.0
    assert reading.kernel_sum_us == 160.0
    assert reading.reconciled
    assert reading.table.exclusion(ExclusionReason.GPU_USER_ANNOTATION).total_us == 700.0
    assert reading.table.exclusion(ExclusionReason.CPU_OP).total_us == 150.0
    assert reading.table.exclusion(ExclusionReason.RUNTIME_CALL).events == 1
    assert reading.table.naive_device_us == 700 + 150 + 160
    labels = {row.name: row.label for row in reading.rows}
    assert labels["ProfilerStep#3"] is RowLabel.ANNOTATION
    assert labels["record_param_comms"] is RowLabel.ANNOTATION
    assert by_name(reading)["ampere_sgemm_128x64_tn"].calls == 2
    check_invariants(reading)


def test_memory_flops_shapes_and_node_columns_are_tolerated() -> None:
    header = [
        *MODERN[:-1],
        "CPU Mem",
        "Self CPU Mem",
        "CUDA Mem",
        "Self CUDA Mem",
        "# of Calls",
        "Node ID",
        "Input Shapes",
        "Total GFLOPs",
    ]
    base_kernel = kernel("triton_poi_fused_add_0", 12.5)
    base_op = op("aten::add", 12.5, 12.5)
    rows = [
        [*base_op[:-1], "1.50 Kb", "-512 b", "2.00 Mb", "1.00 Gb", 1, 0, "[[1, 2], []]", "--"],
        [*base_kernel[:-1], "0 b", "0 b", "0 b", "0 b", 1, -1, "[]", "   0.125"],
    ]
    text = render(header, rows, footer=["Self CUDA time total: 12.500us"], width=14)
    reading = read_profiler_table(text)
    assert [(r.name, r.device_us, r.calls) for r in reading.table.rows] == [
        ("triton_poi_fused_add_0", 12.5, 1)
    ]
    assert reading.reconciled
    assert reading.columns[-1] == "Total GFLOPs"
    assert not any("not read" in note for note in reading.notes)


@pytest.mark.parametrize("device", ["XPU", "MTIA", "HPU", "PRIVATEUSE1", "Device", "NPU"])
def test_device_words(device: str) -> None:
    header = [column.replace("CUDA", device) for column in MODERN]
    text = render(
        header,
        [op("aten::conv2d", 5, 5), kernel("gen_conv", 5)],
        footer=["Self CPU time total: 20.000us", f"Self {device} time total: 5.000us"],
    )
    reading = read_profiler_table(text)
    assert reading.device == device
    assert [row.name for row in reading.table.rows] == ["gen_conv"]
    assert reading.reconciled


def test_seconds_and_milliseconds() -> None:
    rows = [
        kernel("flash_fwd_kernel", 2_500_000),
        kernel("ampere_sgemm_64x64_nn", 1_737),
        kernel("elementwise_kernel", 15),
        op("aten::_flash_attention_forward", 2_500_000, 2_500_000),
    ]
    text = render(MODERN, rows, footer=["Self CUDA time total: 2.502s"])
    assert "2.500s" in text
    assert "1.737ms" in text
    reading = read_profiler_table(text)
    assert reading.table.kernel_us == 2_500_000 + 1_737 + 15
    assert reading.footer_self_device_us == 2_502_000.0
    # 2.501752 s printed as 2.502 s: within half a millisecond, the footer's last digit.
    assert reading.reconciled
    assert reading.tolerance_us > 500


def test_values_wider_than_their_column_push_the_line_right() -> None:
    header = [column.replace("CUDA", "PRIVATEUSE1") for column in MODERN]
    wide = 2_499_990.0
    rows = [
        kernel("ampere_sgemm_128x64_tn", wide, unit="us"),
        op("aten::mm", wide, wide, unit="us"),
    ]
    assert fmt_time(wide, "us") == "2499990.000us"  # 13 characters in a 12-wide column
    text = render(header, rows, footer=["Self PRIVATEUSE1 time total: 2499990.000us"])
    assert "PRIVATEUSE1 time avg" in text.splitlines()[1]  # a 20-character header
    reading = read_profiler_table(text)
    assert reading.device == "PRIVATEUSE1"
    assert [(r.name, r.device_us, r.calls) for r in reading.table.rows] == [
        ("ampere_sgemm_128x64_tn", wide, 1)
    ]
    assert reading.reconciled


def test_pre_2020_table_counts_leaf_ops() -> None:
    header = [
        "Name",
        "Self CPU total %",
        "Self CPU total",
        "CPU total %",
        "CPU total",
        "CPU time avg",
        "CUDA total %",
        "CUDA total",
        "CUDA time avg",
        "Number of Calls",
        "Input Shapes",
    ]

    def row(name: str, self_cpu: float, cpu: float, cuda: float, shapes: str) -> list[object]:
        return [
            name,
            "10.00%",
            fmt_time(self_cpu),
            "20.00%",
            fmt_time(cpu),
            fmt_time(cpu),
            "30.00%",
            fmt_time(cuda),
            fmt_time(cuda),
            1,
            shapes,
        ]

    rows = [
        row("conv2d", 10, 60, 300, "[[1, 3, 8, 8], [4, 3, 3, 3]]"),
        row("mm", 20, 20, 120, "[[2, 3], [3, 4]]"),
        row("add", 30, 30, 30, "[]"),
        row("cudaEventRecord", 5, 5, 0, "[]"),
    ]
    text = render(
        header,
        rows,
        footer=["Self CPU time total: 65.000us", "CUDA time total: 450.000us"],
        width=15,
        align="<",
    )
    reading = read_profiler_table(text)
    assert reading.legacy
    assert {(r.name, r.device_us) for r in reading.table.rows} == {("mm", 120.0), ("add", 30.0)}
    assert reading.table.kernel_us == 150.0
    assert reading.table.naive_device_us == 450.0
    assert reading.table.exclusion(ExclusionReason.CPU_OP).total_us == 300.0
    assert reading.footer_self_device_us is None
    assert reading.footer_self_cpu_us == 65.0
    assert not reading.reconciled
    assert reading.hidden_device_us is None
    rows_by_name = by_name(reading)
    assert rows_by_name["conv2d"].label is RowLabel.OP
    assert not rows_by_name["conv2d"].counted
    assert rows_by_name["mm"].self_device_us is None
    assert rows_by_name["mm"].device_total_us == 120.0
    assert any("pre-2020" in note for note in reading.notes)
    assert any("inclusive" in note for note in reading.notes)


def test_torch_0_4_layout_without_self_columns_or_footer() -> None:
    header = ["Name", "CPU time", "CUDA time", "Calls", "CPU total", "CUDA total"]
    rows = [
        ["mm", fmt_time(20), fmt_time(120), 1, fmt_time(20), fmt_time(120)],
        ["relu", fmt_time(5), fmt_time(0), 1, fmt_time(5), fmt_time(0)],
    ]
    text = render(header, rows, width=15, align="<", closing=False) + "\nsome log line\n"
    reading = read_profiler_table(text)
    assert reading.table.rows == ()
    labels = by_name(reading)
    assert labels["mm"].label is RowLabel.AMBIGUOUS
    assert labels["relu"].label is RowLabel.OP
    assert any("closing separator" in note for note in reading.notes)


def test_partial_layout_without_device_total_labels_by_name() -> None:
    text = render(
        ["Name", "Self CUDA"],
        [
            ["aten::addmm", fmt_time(40)],
            ["void cutlass::Kernel<Gemm>(Gemm::Params)", fmt_time(40)],
            ["mystery_thing", fmt_time(3)],
            ["model_inference", fmt_time(0)],
        ],
        footer=["Self CUDA time total: 43.000us"],
    )
    reading = read_profiler_table(text)
    labels = {row.name: row.label for row in reading.rows}
    assert labels == {
        "aten::addmm": RowLabel.OP,
        "void cutlass::Kernel<Gemm>(Gemm::Params)": RowLabel.KERNEL,
        "mystery_thing": RowLabel.AMBIGUOUS,
        "model_inference": RowLabel.OP,
    }
    assert reading.table.kernel_us == 40.0
    assert reading.hidden_device_us == 3.0
    assert reading.table.exclusion(ExclusionReason.OTHER).total_us == 3.0
    assert [row.name for row in reading.ambiguous] == ["mystery_thing"]
    assert any("partial layout" in note for note in reading.notes)
    assert any("AMBIGUOUS" in note for note in reading.notes)


def test_cpu_only_table_gives_an_empty_table() -> None:
    header = [
        "Name",
        "Self CPU %",
        "Self CPU",
        "CPU total %",
        "CPU total",
        "CPU time avg",
        "# of Calls",
    ]
    rows = [
        ["aten::linear", "10.00%", "5.000us", "90.00%", "45.000us", "45.000us", 1],
        ["aten::addmm", "80.00%", "40.000us", "80.00%", "40.000us", "40.000us", 1],
    ]
    reading = read_profiler_table(render(header, rows, footer=["Self CPU time total: 50.000us"]))
    assert reading.table == KernelTable.empty()
    assert reading.device == "CPU"
    assert reading.footer_self_cpu_us == 50.0
    assert reading.footer_self_device_us is None
    assert all(row.label is RowLabel.OP for row in reading.rows)
    assert any("CPU-only" in note for note in reading.notes)


def test_banner_and_missing_top_separator_are_tolerated() -> None:
    body = render(MODERN, [kernel("gemm_kernel", 7)], footer=["Self CUDA time total: 7.000us"])
    banner = "=" * 40 + "\nMy header\n"
    assert read_profiler_table(banner + body).table.kernel_us == 7.0
    headless = "\n".join(body.splitlines()[1:])
    reading = read_profiler_table("STAGE: log line\n" + headless)
    assert reading.table.kernel_us == 7.0
    assert any("no separator line above" in note for note in reading.notes)


def test_to_dict_is_plain() -> None:
    reading = read_profiler_table(
        render(MODERN, [kernel("gemm_kernel", 7)], footer=["Self CUDA time total: 7.000us"])
    )
    document = reading.to_dict()
    assert document["reconciled"] is True
    assert document["rows"] == [reading.rows[0].to_dict()]
    assert document["table"] == reading.table.to_dict()


# --------------------------------------------------------------------------- truncation, footer


def test_two_kernels_with_the_same_truncated_name_are_merged() -> None:
    first = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"
    second = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)"
    shown = display(first)
    assert shown == display(second)
    assert len(shown) == 55
    text = render(
        MODERN,
        [kernel(first, 3), kernel(second, 5, calls=2), kernel("gemm_kernel", 1)],
        footer=["Self CUDA time total: 9.000us"],
    )
    reading = read_profiler_table(text)
    merged = {r.name: (r.device_us, r.calls) for r in reading.table.rows}
    assert merged == {shown: (8.0, 3), "gemm_kernel": (1.0, 1)}
    assert reading.possible_collisions == (shown,)
    assert [row.truncated for row in reading.rows] == [True, True, False]
    assert any("truncated" in note and "merged" in note for note in reading.notes)
    assert reading.reconciled


def test_rows_hidden_by_row_limit_show_in_the_footer() -> None:
    shown = [kernel("gemm_kernel", 100), op("aten::mm", 100, 100)]
    text = render(MODERN, shown, footer=["Self CUDA time total: 130.000us"])
    reading = read_profiler_table(text)
    assert reading.hidden_device_us == 30.0
    assert not reading.reconciled
    assert any("row_limit" in note for note in reading.notes)


def test_only_op_rows_printed_is_not_read_as_legacy() -> None:
    text = render(
        MODERN,
        [op("aten::mm", 100, 100), op("aten::add", 5, 5)],
        footer=["Self CUDA time total: 2.500s"],
    )
    reading = read_profiler_table(text)
    assert not reading.legacy
    assert reading.table.rows == ()
    assert reading.hidden_device_us == 2_500_000.0
    assert any("not read as a legacy table" in note for note in reading.notes)


def test_counted_rows_exceeding_the_footer_are_reported() -> None:
    text = render(MODERN, [kernel("gemm_kernel", 100)], footer=["Self CUDA time total: 50.000us"])
    reading = read_profiler_table(text)
    assert reading.hidden_device_us is None
    assert not reading.reconciled
    assert any("exceed the footer" in note for note in reading.notes)


def test_without_a_footer_nothing_reconciles() -> None:
    reading = read_profiler_table(render(MODERN, [kernel("gemm_kernel", 100)]))
    assert reading.footer_self_device_us is None
    assert reading.hidden_device_us is None
    assert not reading.reconciled
    assert reading.table.kernel_us == 100.0


# --------------------------------------------------------------------------- labelling


@pytest.mark.parametrize(
    ("row", "label"),
    [
        (kernel("triton_poi_fused_add_0", 4), RowLabel.KERNEL),
        (op("triton_poi_fused_add_0", 0, 4), RowLabel.ANNOTATION),
        (op("vllm::rms_norm", 4, 4), RowLabel.OP),
        (op("c10d::allreduce_", 4, 4), RowLabel.OP),
        (op("nccl:all_reduce", 0, 4), RowLabel.ANNOTATION),
        (
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 4),
            RowLabel.KERNEL,
        ),
        (op("autograd::engine::evaluate_function: AddmmBackward0", 0, 4), RowLabel.ANNOTATION),
        (op("Optimizer.step#SGD.step", 0, 4), RowLabel.ANNOTATION),
        (op("torch/nn/modules/module.py(1501): _call_impl", 0, 4), RowLabel.ANNOTATION),
        (op("hipMemcpyAsync", 0, 0), RowLabel.OP),
        (op("cudaLaunchKernel", 4, 4), RowLabel.AMBIGUOUS),
        (kernel("some_device_thing", 4), RowLabel.KERNEL),
        (op("some_host_thing", 4, 4), RowLabel.AMBIGUOUS),
        (op("some_host_range", 0, 4), RowLabel.ANNOTATION),
        (op("some_parent", 2, 4), RowLabel.AMBIGUOUS),
        (op("some_host_op", 0, 0), RowLabel.OP),
        (op("void k<1>(int)", 2, 4), RowLabel.AMBIGUOUS),
    ],
)
def test_labelling_rules(row: list[object], label: RowLabel) -> None:
    text = render(MODERN, [row, kernel("anchor_gemm", 1)])
    reading = read_profiler_table(text)
    labelled = reading.rows[0]
    assert labelled.label is label, labelled.reason
    assert labelled.reason
    assert labelled.counted is (label is RowLabel.KERNEL)


def test_gpu_span_of_an_annotation_is_paired_with_its_host_range() -> None:
    rows = [
        modern_row("forward", self_cpu=0, cpu_total=0, self_dev=500, dev_total=500, calls=1),
        modern_row("forward", self_cpu=400, cpu_total=600, self_dev=0, dev_total=150, calls=1),
        kernel("ampere_sgemm_128x64_tn", 150),
    ]
    reading = read_profiler_table(render(MODERN, rows, footer=["Self CUDA time total: 150.000us"]))
    assert [row.label for row in reading.rows[:2]] == [RowLabel.ANNOTATION, RowLabel.ANNOTATION]
    assert reading.table.exclusion(ExclusionReason.GPU_USER_ANNOTATION).total_us == 500.0
    assert reading.reconciled


def test_negative_device_time_is_ambiguous() -> None:
    rows = [op("aten::weird", -3, 5), kernel("gemm_kernel", 5)]
    reading = read_profiler_table(render(MODERN, rows, footer=["Self CUDA time total: 5.000us"]))
    assert reading.rows[0].label is RowLabel.AMBIGUOUS
    assert reading.rows[0].self_device_us == -3.0
    assert reading.table.naive_device_us == 5.0
    assert reading.reconciled


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no printed key_averages"),
        ("hello\nworld\n", "no printed key_averages"),
        (render(["Label", "Self CUDA"], [["a", "1.000us"]]), "'Name'"),
        (render(["Name", "Flavour"], [["a", "sweet"]]), "no time column"),
        (render(["Name", "CUDA time avg"], [["a", "1.000us"]]), "neither"),
        (
            render(["Name", "Self CUDA", "XPU total"], [["a", "1.000us", "1.000us"]]),
            "more than one device",
        ),
        (render(["Name", "Self CUDA", "Self CUDA"], [["a", "1.000us", "1.000us"]]), "twice"),
    ],
)
def test_not_a_table(text: str, match: str) -> None:
    with pytest.raises(TraceFormatError, match=match) as caught:
        read_profiler_tables(text)
    assert caught.value.kind is DamageKind.NOT_A_TABLE


@pytest.mark.parametrize(
    ("cell", "match"),
    [("1.5 parsecs", "not a time"), ("", "no 'Self CUDA' value"), ("9" * 18 + "s", "plausible")],
)
def test_bad_values_raise_with_the_line_offset(cell: str, match: str) -> None:
    text = render(
        ["Name", "Self CUDA", "# of Calls"],
        [["gemm_kernel", "1.000us", 1], ["bad_kernel", cell, 1]],
    )
    with pytest.raises(TraceFormatError, match=match) as caught:
        read_profiler_table(text)
    assert caught.value.kind is DamageKind.MALFORMED
    line_start = text.rindex("\n", 0, text.index("bad_kernel")) + 1
    assert caught.value.offset == line_start


def test_bad_calls_and_bad_footer_raise() -> None:
    text = render(["Name", "Self CUDA", "# of Calls"], [["gemm_kernel", "1.000us", "many"]])
    with pytest.raises(TraceFormatError, match="not a count"):
        read_profiler_table(text)
    text = render(
        ["Name", "Self CUDA"], [["gemm_kernel", "1.000us"]], footer=["Self CUDA time total: soon"]
    )
    with pytest.raises(TraceFormatError, match="not a time"):
        read_profiler_table(text)


def test_value_objects_validate() -> None:
    with pytest.raises(ValueError, match="always counted"):
        LabelledRow(
            name="k",
            label=RowLabel.KERNEL,
            reason="r",
            self_device_us=1.0,
            device_total_us=1.0,
            calls=1,
            truncated=False,
            counted=False,
        )
    with pytest.raises(ValueError, match="name"):
        LabelledRow(
            name=" ",
            label=RowLabel.OP,
            reason="r",
            self_device_us=None,
            device_total_us=None,
            calls=None,
            truncated=False,
            counted=False,
        )
    with pytest.raises(ValueError, match="kernel_sum_us"):
        ProfilerTableReading(
            table=KernelTable.empty(),
            device="CUDA",
            rows=(),
            legacy=False,
            footer_self_device_us=None,
            footer_self_cpu_us=None,
            kernel_sum_us=1.0,
            tolerance_us=0.0,
            hidden_device_us=None,
            possible_collisions=(),
        )


# --------------------------------------------------------------------------- torch itself


@pytest.fixture(scope="module")
def torch_events() -> EventList:
    pytest.importorskip("torch")
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import EventList, FunctionEvent

    def event(**fields: object) -> FunctionEvent:
        return FunctionEvent(stack=[], thread=0, use_device="cuda", **fields)

    mm = event(id=1, name="aten::mm", start_us=0, end_us=200)
    mm.append_kernel("ampere_sgemm_128x64_tn", 0, 150)
    launch = event(id=2, name="cudaLaunchKernel", start_us=1, end_us=5)
    kernels = [
        event(
            id=10 + i,
            name="ampere_sgemm_128x64_tn",
            start_us=10,
            end_us=10 + us,
            device_type=DeviceType.CUDA,
        )
        for i, us in enumerate((120, 30))
    ]
    copy = event(
        id=20,
        name="Memcpy HtoD (Pageable -> Device)",
        start_us=0,
        end_us=8,
        device_type=DeviceType.CUDA,
    )
    span = event(
        id=30,
        name="forward",
        start_us=0,
        end_us=500,
        device_type=DeviceType.CUDA,
        is_user_annotation=True,
    )
    host = event(id=31, name="forward", start_us=0, end_us=600)
    slow = event(
        id=40, name="flash_fwd_kernel", start_us=0, end_us=2_499_990, device_type=DeviceType.CUDA
    )
    events = EventList([mm, launch, *kernels, copy, span, host, slow], use_device="cuda")
    events._build_tree()
    return events.key_averages()


def test_torch_printed_table_matches_key_averages(torch_events: EventList) -> None:
    averages = torch_events
    reading = read_profiler_table(averages.table(time_unit="us"))
    assert reading.table == KernelTable.from_key_averages(averages)
    assert reading.reconciled
    assert reading.hidden_device_us == 0.0
    default = read_profiler_table(averages.table())
    assert default.reconciled  # 2.500s printed to the millisecond
    assert {row.name for row in default.table.rows} == {row.name for row in reading.table.rows}


def test_torch_row_limit_and_narrow_names(torch_events: EventList) -> None:
    averages = torch_events
    limited = read_profiler_table(averages.table(row_limit=3, time_unit="us"))
    assert limited.hidden_device_us == 2_499_990.0 + 8.0
    narrow = read_profiler_table(averages.table(max_name_column_width=20, time_unit="us"))
    assert "ampere_sgemm_128x..." in narrow.possible_collisions
    assert narrow.table.memcpy_us == 8.0
    assert narrow.reconciled


def test_torch_legacy_table() -> None:
    pytest.importorskip("torch")
    from torch.autograd.profiler_util import EventList, FunctionEvent

    def event(**fields: object) -> FunctionEvent:
        return FunctionEvent(stack=[], thread=0, use_device="cuda", is_legacy=True, **fields)

    pow_op = event(id=1, name="aten::pow", start_us=0, end_us=2000)
    pow_op.append_kernel("aten::pow", 0, 1737)
    square = event(id=2, name="aten::square", start_us=3000, end_us=3100)
    square.append_kernel("aten::square", 0, 15)
    record = event(id=3, name="cudaEventRecord", start_us=4000, end_us=4003)
    events = EventList([pow_op, square, record], use_device="cuda")
    events._build_tree()
    averages = events.key_averages()
    reading = read_profiler_table(averages.table())
    assert reading.legacy
    assert reading.reconciled
    assert reading.table == KernelTable.from_key_averages(averages)
    assert reading.table.kernel_us == 1752.0


def test_torch_cpu_profile_prints_a_cpu_only_table() -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(torch.randn(4, 8)).sum().backward()
    reading = read_profiler_table(prof.key_averages().table(row_limit=-1))
    assert reading.table == KernelTable.empty()
    assert reading.device == "CPU"
    assert reading.footer_self_cpu_us is not None
    assert any(row.name == "aten::addmm" for row in reading.rows)


def test_torch_stack_memory_and_device_dialects() -> None:
    pytest.importorskip("torch")
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import EventList, FunctionEvent

    for device, kind in (
        ("xpu", DeviceType.XPU),
        ("mtia", DeviceType.MTIA),
        ("npu", DeviceType.PrivateUse1),
    ):
        host = FunctionEvent(
            id=1,
            name="aten::addmm",
            thread=0,
            start_us=0,
            end_us=300,
            use_device=device,
            input_shapes=[[4, 8], [8, 16]],
            cpu_memory_usage=2048,
            device_memory_usage=1536,
            flops=1024,
            stack=["model.py(12): forward", "train.py(3): <module>"],
        )
        host.append_kernel("gemm_kernel", 0, 120)
        device_row = FunctionEvent(
            id=2,
            name="gemm_kernel",
            thread=0,
            start_us=10,
            end_us=130,
            device_type=kind,
            use_device=device,
            stack=[],
        )
        events = EventList(
            [host, device_row], use_device=device, profile_memory=True, with_flops=True
        )
        events._build_tree()
        averages = events.key_averages(group_by_input_shapes=True, group_by_stack_n=2)
        reading = read_profiler_table(averages.table())
        assert reading.device == device.upper()
        assert "Source Location" in reading.columns
        assert [(r.name, r.device_us) for r in reading.table.rows] == [("gemm_kernel", 120.0)]
        assert reading.reconciled
        assert reading.table == KernelTable.from_key_averages(averages)


# --------------------------------------------------------------------------- properties

OPS = ["aten::mm", "aten::addmm", "aten::conv2d", "c10d::allreduce_", "aten::copy_"]
KERNELS = [
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4>(int)",
    "triton_poi_fused_add_0",
    "Memcpy HtoD (Pageable -> Device)",
    "Memset (Device)",
    "sm80_xmma_gemm_f16f16_f16f32",
]
OTHERS = ["cudaLaunchKernel", "ProfilerStep#1", "model_inference"]

nanoseconds = st.integers(min_value=0, max_value=5 * 10**9)


def kernel_cells(name: str, ns: int, unit: str | None) -> list[object]:
    printed = fmt_time(ns / 1000, unit)
    zero = fmt_time(0, unit)
    return [name, "0.00%", zero, "0.00%", zero, zero, printed, "1.00%", printed, printed, 1]


def op_cells(name: str, self_ns: int, total_ns: int, unit: str | None) -> list[object]:
    cpu = fmt_time(10, unit)
    total = fmt_time(total_ns / 1000, unit)
    return [
        name,
        "1.00%",
        cpu,
        "1.00%",
        fmt_time(20, unit),
        cpu,
        fmt_time(self_ns / 1000, unit),
        "1.00%",
        total,
        total,
        1,
    ]


def parse_printed(value: str) -> int:
    """ns of a printed time, independently of the module under test."""
    match = re.fullmatch(r"([0-9.]+)(us|ms|s)", value)
    assert match is not None
    number, unit = match.groups()
    scale = {"us": 10**3, "ms": 10**6, "s": 10**9}[unit]
    whole, _, fraction = number.partition(".")
    return (int(whole) * 1000 + int(fraction.ljust(3, "0")[:3])) * scale // 1000


@st.composite
def printed_tables(draw: st.DrawFn) -> tuple[str, dict[str, int], int, int]:
    """A rendered table, its kernel rows' printed ns, the true footer ns, the hidden ns.

    The first row is always a kernel; ``row_limit`` may hide any of the others.
    """
    unit = draw(st.sampled_from([None, "us", "ms", "s"]))
    kernels = draw(st.lists(st.sampled_from(KERNELS), min_size=1, max_size=5, unique=True))
    others = draw(st.lists(st.sampled_from(OPS + OTHERS), max_size=5, unique=True))
    rows: list[tuple[str, list[object], int | None]] = []
    for name in kernels:
        ns = draw(nanoseconds)
        rows.append((name, kernel_cells(name, ns, unit), ns))
    for name in others:
        self_ns = 0 if name in OTHERS else draw(nanoseconds)
        total_ns = 0 if name == "cudaLaunchKernel" else self_ns + draw(nanoseconds)
        rows.append((name, op_cells(name, self_ns, total_ns, unit), None))
    order = [rows[0], *draw(st.permutations(rows[1:]))]
    limit = draw(st.integers(min_value=1, max_value=len(order)))
    shown = order[:limit]
    true_footer = sum(ns for _, _, ns in order if ns is not None)
    hidden = sum(ns for _, _, ns in order[limit:] if ns is not None)
    footer = [
        "Self CPU time total: 1.000ms",
        f"Self CUDA time total: {fmt_time(true_footer / 1000, unit)}",
    ]
    text = render(MODERN, [cells for _, cells, _ in shown], footer=footer)
    printed = {name: parse_printed(str(cells[6])) for name, cells, ns in shown if ns is not None}
    return text, printed, true_footer, hidden


@given(printed_tables())
def test_round_trip_of_rendered_tables(case: tuple[str, dict[str, int], int, int]) -> None:
    text, printed, true_footer, hidden = case
    reading = read_profiler_table(text)
    check_invariants(reading)
    assert not reading.legacy
    assert {row.name: round(row.device_us * 1000) for row in reading.table.rows} == printed
    assert {row.name: row.kind for row in reading.table.rows} == {
        name: KernelKind.of(name) for name in printed
    }
    assert round(reading.kernel_sum_us * 1000) == sum(printed.values())
    footer = reading.footer_self_device_us
    assert footer is not None
    tolerance_ns = reading.tolerance_us * 1000 + 1e-6
    assert abs(round(footer * 1000) - true_footer) <= tolerance_ns
    if hidden == 0:
        assert reading.reconciled
    assert reading.hidden_device_us is not None
    if reading.hidden_device_us > 0:
        assert abs(reading.hidden_device_us * 1000 - hidden) <= tolerance_ns
    else:
        assert reading.reconciled
        assert hidden <= 2 * tolerance_ns


MUTATION_TEXT = st.text(
    alphabet=" -.:%#0123456789usmNameSelfCUDAXPUtotalavg\n\r\t[],|.", max_size=24
)


@st.composite
def mutations(draw: st.DrawFn, base: str) -> str:
    text = base
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        size = len(text)
        at = draw(st.integers(min_value=0, max_value=size))
        action = draw(st.sampled_from(["delete", "insert", "replace", "truncate", "lines"]))
        if action == "delete":
            text = text[:at] + text[draw(st.integers(min_value=at, max_value=min(size, at + 40))) :]
        elif action == "insert":
            text = text[:at] + draw(MUTATION_TEXT) + text[at:]
        elif action == "replace" and at < size:
            text = text[:at] + draw(st.characters()) + text[at + 1 :]
        elif action == "truncate":
            text = text[:at]
        else:
            lines = text.split("\n")
            lines = draw(st.permutations(lines)) if len(lines) < 8 else lines[::-1]
            text = "\n".join(lines)
    return text


def read_or_reject(text: str) -> None:
    try:
        readings = read_profiler_tables(text)
    except TraceFormatError:
        return
    for reading in readings:
        check_invariants(reading)
    if len(readings) > 1:
        with pytest.raises(TraceFormatError, match="read_profiler_tables"):
            read_profiler_table(text)
    else:
        assert (read_profiler_table(text),) == readings


@given(data=st.data())
def test_mutated_fixtures_read_or_raise_trace_format_error(
    shared_fixtures: Path, data: st.DataObject
) -> None:
    name = data.draw(
        st.sampled_from(["legacy_cuda_event_timing.txt", "tutorial_partial_cuda_and_xpu.txt"])
    )
    read_or_reject(data.draw(mutations(fixture_text(shared_fixtures, name))))


SYNTHETIC = render(
    MODERN,
    [kernel(IM2COL + "xyz", 3), op("aten::mm", 3, 3), kernel("Memcpy DtoH", 1)],
    footer=["Self CPU time total: 40.000us", "Self CUDA time total: 4.000us"],
)


@given(data=st.data())
def test_mutated_synthetic_tables_read_or_raise_trace_format_error(data: st.DataObject) -> None:
    read_or_reject(data.draw(mutations(SYNTHETIC)))


# ------------------------------------------------------- issue 18: pasted tables, units


def _prefixed(text: str, prefix: str) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def _same_reading(a: ProfilerTableReading, b: ProfilerTableReading) -> None:
    assert a.table == b.table
    assert a.rows == b.rows
    assert (a.reconciled, a.hidden_device_us, a.footer_self_device_us, a.legacy) == (
        b.reconciled,
        b.hidden_device_us,
        b.footer_self_device_us,
        b.legacy,
    )


@pytest.mark.parametrize("prefix", ["# ", "#    ", "// ", "> ", "  # ", "#", ">"])
@pytest.mark.parametrize(
    "name", ["legacy_cuda_event_timing.txt", "tutorial_partial_cuda_and_xpu.txt"]
)
def test_tables_pasted_with_a_comment_prefix(shared_fixtures: Path, prefix: str, name: str) -> None:
    text = fixture_text(shared_fixtures, name)
    plain = read_profiler_tables(text)
    pasted = read_profiler_tables("some prose before\n" + _prefixed(text, prefix) + "after\n")
    assert len(pasted) == len(plain)
    for a, b in zip(pasted, plain, strict=True):
        _same_reading(a, b)
        assert any(repr(prefix.strip()) in note for note in a.notes), a.notes


def test_a_line_without_the_prefix_ends_the_table_and_says_so() -> None:
    rows = [kernel("ampere_sgemm_64x64_nn", 1_000), kernel("elementwise_kernel", 500)]
    text = render(MODERN, rows, footer=["Self CUDA time total: 1.500ms"])
    lines = _prefixed(text, "# ").splitlines(keepends=True)
    lines[4] = lines[4][2:]  # the second row lost its '# '
    reading = read_profiler_table("".join(lines))
    assert reading.table.kernel_us == 1_000
    assert not reading.reconciled
    assert any("does not carry the comment prefix '#'" in note for note in reading.notes)


def test_every_unit_torch_or_a_user_prints() -> None:
    rows = [
        kernel("ampere_sgemm_64x64_nn", 1_740_000),  # printed 1.740s
        kernel("flash_fwd_kernel", 12_000),  # 12.000ms
        kernel("elementwise_kernel", 5),  # 5.000us
        [
            "triton_poi_fused_0",
            "0.00%",
            "0ns",
            "0.00%",
            "0ns",
            "0ns",
            "700ns",
            "0.00%",
            "700ns",
            "700ns",
            1,
        ],
    ]
    text = render(MODERN, rows, footer=["Self CUDA time total: 1.752s"])
    assert "1.740s" in text
    assert "12.000ms" in text
    assert "700ns" in text
    reading = read_profiler_table(text)
    assert reading.table.kernel_us == 1_740_000 + 12_000 + 5 + 0.7
    assert reading.reconciled


def test_memset_and_memcpy_rows_go_to_their_kinds() -> None:
    rows = [
        kernel("ampere_sgemm_64x64_nn", 100),
        kernel("memset32", 3),
        kernel("memcpy32_post", 2),
        kernel("Memset (Device)", 1),
    ]
    reading = read_profiler_table(render(MODERN, rows, footer=["Self CUDA time total: 106.000us"]))
    assert reading.table.kernel_us == 100
    assert reading.table.memset_us == 4
    assert reading.table.memcpy_us == 2
    assert reading.reconciled
    assert by_name(reading)["memset32"].reason.startswith("Memcpy/Memset")


def test_latin_1_text_is_decoded_with_a_note_not_replacement_characters() -> None:
    rows = [kernel("caf\u00e9_kernel", 10)]
    text = render(MODERN, rows, footer=["Self CUDA time total: 10.000us"])
    decoded, note = decode_table_bytes(text.encode("latin-1"))
    assert "\ufffd" not in decoded
    assert note is not None
    assert "not UTF-8" in note
    assert "Latin-1" in note
    assert read_profiler_table(decoded).rows[0].name == "caf\u00e9_kernel"
    assert decode_table_bytes(text.encode("utf-8")) == (text, None)
