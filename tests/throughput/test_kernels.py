"""KernelTable as a value object: validation, the monoid laws, diff/top/by_kind, JSON."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise.errors import InvalidInputError
from probewise.throughput.kernels import (
    Exclusion,
    ExclusionReason,
    KernelKind,
    KernelRow,
    KernelTable,
    StepBreakdown,
    TraceSource,
)

NAMES = [
    "ampere_sgemm_128x64_tn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)",
    "flash_fwd_kernel",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
    "Memcpy HtoD (Pageable -> Device)",
    "Memset (Device)",
    "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)",
    "mystery",
]

durations = st.integers(min_value=0, max_value=10**12).map(lambda ns: ns / 1000)
rows = st.builds(
    KernelRow.named,
    st.sampled_from(NAMES),
    calls=st.one_of(st.none(), st.integers(0, 10**6)),
    device_us=durations,
)
exclusions = st.builds(
    Exclusion,
    reason=st.sampled_from(list(ExclusionReason)),
    events=st.integers(0, 10**6),
    total_us=durations,
)
steps = st.builds(
    StepBreakdown,
    step=st.integers(0, 5),
    span_us=durations,
    kernel_us=durations,
    memcpy_us=durations,
    memset_us=durations,
    device_events=st.integers(0, 1000),
)
sources = st.builds(
    TraceSource,
    path=st.sampled_from(["a.json", "b.json.gz"]),
    rank=st.one_of(st.none(), st.integers(0, 7)),
    world_size=st.one_of(st.none(), st.integers(1, 8)),
    events=st.integers(0, 100),
)


@st.composite
def tables(draw: st.DrawFn) -> KernelTable:
    step_items = {s.step: s for s in draw(st.lists(steps, max_size=3))}
    return KernelTable(
        rows=KernelTable.of_rows(draw(st.lists(rows, max_size=6))).rows,
        excluded=KernelTable.of_rows([], excluded=draw(st.lists(exclusions, max_size=3))).excluded,
        naive_device_us=draw(st.one_of(st.none(), durations)),
        steps=step_items.values(),
        sources=draw(st.lists(sources, max_size=2)),
    )


@given(tables(), tables(), tables())
def test_merge_is_associative(a: KernelTable, b: KernelTable, c: KernelTable) -> None:
    assert (a + b) + c == a + (b + c)


@given(tables(), tables())
def test_merge_is_commutative(a: KernelTable, b: KernelTable) -> None:
    assert a + b == b + a


@given(tables())
def test_empty_is_the_identity(a: KernelTable) -> None:
    assert KernelTable.empty() + a == a
    assert a + KernelTable.empty() == a


@given(tables(), tables())
def test_merge_adds_the_totals_exactly(a: KernelTable, b: KernelTable) -> None:
    merged = a + b
    assert round(merged.kernel_us * 1000) == round(a.kernel_us * 1000) + round(b.kernel_us * 1000)
    assert round(merged.memcpy_us * 1000) == round(a.memcpy_us * 1000) + round(b.memcpy_us * 1000)


@given(tables())
def test_json_round_trip(a: KernelTable) -> None:
    assert KernelTable.from_json(a.to_json()) == a


@given(tables())
def test_kernel_us_is_the_sum_of_kernel_rows_only(a: KernelTable) -> None:
    kernel_ns = sum(round(r.device_us * 1000) for r in a.rows if not r.kind.is_transfer)
    assert round(a.kernel_us * 1000) == kernel_ns
    memset_ns = sum(round(r.device_us * 1000) for r in a.rows if r.kind is KernelKind.MEMSET)
    assert round(a.memset_us * 1000) == memset_ns
    assert [r.device_us for r in a.rows] == sorted((r.device_us for r in a.rows), reverse=True)


def test_rows_are_sorted_and_unique() -> None:
    small = KernelRow.named("mystery", calls=1, device_us=1.0)
    big = KernelRow.named("ampere_sgemm_128x64_tn", calls=2, device_us=5.0)
    table = KernelTable(rows=(small, big))
    assert table.rows == (big, small)
    with pytest.raises(ValueError, match="unique"):
        KernelTable(rows=(small, small))
    merged = KernelTable.of_rows([small, small])
    assert merged.rows[0].calls == 2
    assert merged.rows[0].device_us == 2.0


def test_durations_live_on_a_nanosecond_grid() -> None:
    row = KernelRow.named("mystery", calls=1, device_us=1.23456)
    assert row.device_us == 1.235
    with pytest.raises(ValueError, match="finite"):
        KernelRow.named("mystery", calls=1, device_us=-1.0)
    with pytest.raises(ValueError, match="finite"):
        KernelRow.named("mystery", calls=1, device_us=math.nan)
    with pytest.raises(TypeError):
        KernelRow.named("mystery", calls=1, device_us=True)
    with pytest.raises(ValueError, match="calls"):
        KernelRow.named("mystery", calls=-1, device_us=1.0)
    with pytest.raises(ValueError, match="name"):
        KernelRow.named("", calls=1, device_us=1.0)


def test_top_by_kind_and_diff() -> None:
    before = KernelTable(
        rows=(
            KernelRow.named("ampere_sgemm_128x64_tn", calls=10, device_us=100.0),
            KernelRow.named("flash_fwd_kernel", calls=5, device_us=50.0),
            KernelRow.named("Memcpy HtoD (Pageable -> Device)", calls=1, device_us=30.0),
        )
    )
    after = KernelTable(
        rows=(
            KernelRow.named("ampere_sgemm_128x64_tn", calls=10, device_us=60.0),
            KernelRow.named("triton_poi_fused_add_0", calls=5, device_us=20.0),
        )
    )
    assert before.kernel_us == 150.0
    assert before.memcpy_us == 30.0
    assert before.device_us == 180.0
    assert [r.name for r in before.top(2)] == ["ampere_sgemm_128x64_tn", "flash_fwd_kernel"]
    assert before.top(10) == before.rows
    with pytest.raises(InvalidInputError):
        before.top(-1)
    assert before.by_kind() == {
        KernelKind.GEMM: 100.0,
        KernelKind.ATTENTION: 50.0,
        KernelKind.MEMCPY: 30.0,
    }
    diff = before.diff(after)
    assert diff.delta_kernel_us == -70.0
    by_name = {c.name: c for c in diff.changes}
    assert by_name["flash_fwd_kernel"].after_us == 0.0
    assert by_name["flash_fwd_kernel"].ratio == 0.0
    assert by_name["triton_poi_fused_add_0"].ratio == math.inf
    assert by_name["ampere_sgemm_128x64_tn"].delta_us == -40.0
    deltas = [abs(c.delta_us) for c in diff.changes]
    assert deltas == sorted(deltas, reverse=True)
    assert diff.to_dict()["delta_kernel_us"] == -70.0


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ampere_sgemm_128x64_tn", KernelKind.GEMM),
        ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x128x32", KernelKind.GEMM),
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_tn>(Params)", KernelKind.GEMM),
        ("Cijk_Ailk_Bljk_SB_MT64x64x16", KernelKind.GEMM),
        ("triton_mm_0", KernelKind.GEMM),
        ("aten::mm", KernelKind.GEMM),
        ("void implicit_convolve_sgemm<float, float, 128, 5, 5>(int)", KernelKind.GEMM),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits>(Params)",
            KernelKind.ATTENTION,
        ),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", KernelKind.ATTENTION),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)",
            KernelKind.ELEMENTWISE,
        ),
        ("triton_poi_fused_add_cos_sin_0", KernelKind.ELEMENTWISE),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<int>(int)",
            KernelKind.ELEMENTWISE,
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >(int)",
            KernelKind.REDUCTION,
        ),
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>(float*)",
            KernelKind.REDUCTION,
        ),
        ("triton_red_fused_sum_0", KernelKind.REDUCTION),
        (
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int)",
            KernelKind.NORMALIZATION,
        ),
        (
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(float)",
            KernelKind.NORMALIZATION,
        ),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", KernelKind.COMMUNICATION),
        (
            "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            KernelKind.COMMUNICATION,
        ),
        ("Memcpy DtoD (Device -> Device)", KernelKind.MEMCPY),
        ("Memset (Device)", KernelKind.MEMSET),
        ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", KernelKind.OTHER),
    ],
)
def test_kernel_kinds(name: str, kind: KernelKind) -> None:
    assert KernelKind.of(name) is kind


def test_missing_ranks() -> None:
    table = KernelTable(
        rows=(),
        sources=(
            TraceSource(path="r0.json", rank=0, world_size=4),
            TraceSource(path="r2.json", rank=2, world_size=4),
        ),
    )
    assert table.ranks == (0, 2)
    assert table.world_size == 4
    assert table.missing_ranks == (1, 3)


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"format": "other"}', '{"format": "probewise.KernelTable/1"}', "{bad"],
)
def test_from_json_rejects_other_documents(text: str) -> None:
    with pytest.raises(InvalidInputError):
        KernelTable.from_json(text)
