"""KernelTable as a value object: validation, the monoid laws, diff/top/by_kind, JSON."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

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
    notes=st.lists(st.sampled_from(["a note", "another"]), max_size=2).map(tuple),
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


@pytest.mark.parametrize("field", ["rows", "excluded", "steps", "sources"])
@pytest.mark.parametrize("bad", [None, 3, "rows", [object()]])
def test_a_table_and_its_parts_refuse_what_is_not_their_rows(field: str, bad: object) -> None:
    # Before, KernelTable(rows=None) escaped as the bare TypeError of iterating None,
    # and TableParts took anything.
    from probewise.errors import ArgumentTypeError
    from probewise.throughput import TableParts

    fields: dict[str, object] = {"rows": (), field: bad}
    for cls in (KernelTable, TableParts):
        with pytest.raises(ArgumentTypeError, match=rf"^{cls.__name__}\.{field} must "):
            cls(**fields)  # type: ignore[arg-type]


def test_a_reader_of_another_format_builds_a_table_from_parts() -> None:
    from probewise.throughput import TableParts

    row = KernelRow.named("flash_fwd_kernel", calls=1, device_us=2.0)
    parts = TableParts(rows=[row, row], naive_device_us=4)  # a list, and repeats
    table = KernelTable.of_parts(parts)
    assert table.rows == (KernelRow.named("flash_fwd_kernel", calls=2, device_us=4.0),)
    assert table.naive_device_us == 4.0
    assert parts.rows == (row, row)


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
        ("void implicit_convolve_sgemm<float, float, 128, 5, 5>(int)", KernelKind.CONVOLUTION),
        ("volta_scudnn_128x64_relu_interior_nn_v1", KernelKind.CONVOLUTION),
        ("cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1", KernelKind.CONVOLUTION),
        (
            "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32>(P)",
            KernelKind.CONVOLUTION,
        ),
        (
            "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc",
            KernelKind.CONVOLUTION,
        ),
        ("void at::native::im2col_kernel<float>(long, float co...", KernelKind.CONVOLUTION),
        (
            "void split_embedding_codegen_forward_unweighted_kernel<c10::Half>(at::Accessor)",
            KernelKind.EMBEDDING,
        ),
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int)", KernelKind.EMBEDDING),
        (
            "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_hfp8_to_float_gpu>(int)",
            KernelKind.ELEMENTWISE,
        ),
        ("void splitKreduce_kernel<float, float>(cublasSplitKParams<float>)", KernelKind.GEMM),
        ("memset32", KernelKind.MEMSET),
        ("memcpy32", KernelKind.MEMCPY),
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
        (
            "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)",
            KernelKind.CONVOLUTION,
        ),
        ("void cudnn::ops::scalePackedTensor_kernel<float, float>(long)", KernelKind.OTHER),
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


# Every kernel name in ../shared/fixtures/traces, by its first 72 characters (no two
# names that share them differ in kind), with the kind each one is. The labels were
# set by hand from what each kernel does (its library and function), not copied from
# KernelKind.of: cuDNN's scudnn/xmma fprop-dgrad-wgrad/winograd/FFT kernels and their
# cask/CUTLASS helpers are convolutions; fbgemm's TBE kernels (split_embedding_*,
# bounds_check_indices, linearize_index, permute_pooled_embs, fbgemm_gpu::*) are
# embedding; cuBLAS's splitKreduce belongs to its GEMM; radix sorts and MTIA runtime
# spans are OTHER.
FIXTURE_KINDS: dict[KernelKind, tuple[str, ...]] = {
    KernelKind.GEMM: (
        "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0_AFC",
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC",
        "ampere_gcgemm_64x64_nt",
        "ampere_sgemm_128x128_tn",
        "ampere_sgemm_128x128_tt",
        "ampere_sgemm_128x64_nn",
        "ampere_sgemm_32x128_nn",
        "ampere_sgemm_32x128_nt",
        "ampere_sgemm_32x128_tn",
        "ampere_sgemm_32x32_sliced1x4_tn",
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, f",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, flo",
        "void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_",
        "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_tn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_nn_align1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_nn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_nt_align1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_32x6_tn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tt_align4",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x128_32x3_tn_align1",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nt_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nt_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_tn_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_tn_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nt_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nt_align4>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1>",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>",
        "void epilogue::impl::globalKernel<float, float, float, true, true>(int, ",
        "void gemmk1_kernel<float, 256, 5, false, false, false, false, cublasGemv",
        "void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, cublasGe",
        "void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, cublasGe",
        "void scal_kernel<float, float, 1, false, 6, 5, 5, 3>(cublasTransposePara",
        "void sgemm_largek_lds64<true, true, 6, 3, 4, 5, 2, 66>(float*, float con",
        "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, ",
        "void splitKreduce_kernel<float, float, float, float, true, false, false>",
        "void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<",
        "volta_sgemm_128x32_nt",
        "volta_sgemm_32x128_nn",
        "volta_sgemm_32x128_nt",
        "volta_sgemm_32x128_tn",
        "volta_sgemm_64x32_sliced1x4_nn",
        "volta_sgemm_64x32_sliced1x4_tn",
        "volta_sgemm_64x64_nn",
        "volta_sgemm_64x64_nt",
        "volta_sgemm_64x64_tn",
    ),
    KernelKind.ELEMENTWISE: (
        "triton_poi_fused_add_cos_sin_0",
        "void (anonymous namespace)::elementwise_kernel_with_index<int, at::nativ",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsig",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, unsigne",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<long, unsign",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_co",
        "void at::native::(anonymous namespace)::distribution_elementwise_grid_st",
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, ",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::na",
        "void at::native::_scatter_gather_elementwise_kernel<128, 4, at::native::",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_",
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<",
        "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_",
        "void at::native::unrolled_elementwise_kernel<at::native::AUnaryFunctor<f",
        "void at::native::unrolled_elementwise_kernel<at::native::AUnaryFunctor<i",
        "void at::native::unrolled_elementwise_kernel<at::native::BinaryFunctor<d",
        "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add",
        "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<flo",
        "void at::native::unrolled_elementwise_kernel<at::native::MulScalarFuncto",
        "void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_ker",
        "void at::native::vectorized_elementwise_kernel<2, at::native::AUnaryFunc",
        "void at::native::vectorized_elementwise_kernel<2, at::native::FillFuncto",
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous",
        "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunc",
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunc",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunc",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFuncto",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFuncto",
        "void at::native::vectorized_elementwise_kernel<4, at::native::MulScalarF",
        "void at::native::vectorized_elementwise_kernel<4, at::native::compare_sc",
        "void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::log2_kerne",
        "void at::native::vectorized_elementwise_kernel<4, at::native::log_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::logit_back",
        "void at::native::vectorized_elementwise_kernel<4, at::native::logit_kern",
        "void at::native::vectorized_elementwise_kernel<4, at::native::mse_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::nan_to_num",
        "void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_ba",
        "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_ke",
        "void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kerne",
        "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_backw",
        "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kerne",
        "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_",
        "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_",
        "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_hfp8_to_f",
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cud",
        "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cud",
        "void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelData",
        "void nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelData",
    ),
    KernelKind.REDUCTION: (
        "void (anonymous namespace)::softmax_warp_backward<float, float, float, 1",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 1,",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10",
        "void at::native::(anonymous namespace)::adaptive_average_pool<float>(flo",
        "void at::native::(anonymous namespace)::max_pool_backward_nchw<float, fl",
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, flo",
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::n",
        "void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, at::n",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<double, at::",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::n",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<long, at::na",
        "void at_cuda_detail::cub::DeviceScanInitKernel<at_cuda_detail::cub::Scan",
        "void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::AgentSca",
        "void cub::DeviceCompactInitKernel<cub::ReduceByKeyScanTileState<int, int",
        "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*,",
        "void cub::DeviceScanInitKernel<cub::ScanTileState<int, true> >(cub::Scan",
        "void cub::DeviceScanKernel<cub::AgentScanPolicy<128, 15, int, (cub::Bloc",
        "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>(float*, float*",
        "void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, fl",
    ),
    KernelKind.NORMALIZATION: (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<floa",
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x3",
        "void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<float",
        "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, ",
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<flo",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<flo",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(fl",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 32, true, 1>(flo",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(fl",
        "void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_b",
        "void cudnn::bn_bw_1C11_singleread<float, 512, true, 1, 2, 0>(float, floa",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnT",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, t",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, true, 1, tr",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, t",
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::b",
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnnTen",
    ),
    KernelKind.COMMUNICATION: (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, nccl",
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncc",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ",
    ),
    KernelKind.CONVOLUTION: (
        "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolution",
        "cask_cudnn::computeBOffsetsKernel(cask_cudnn::ComputeBOffsetsParams)",
        "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)",
        "cask_cudnn::computeWgradBOffsetsKernel(cask_cudnn::ComputeWgradBOffsetsP",
        "cask_cudnn::computeWgradSplitKOffsetsKernel(cask_cudnn::ComputeSplitKOff",
        "cask_cudnn_infer::computeBOffsetsKernel(cask_cudnn_infer::ComputeBOffset",
        "cask_cudnn_train::computeWgradBOffsetsKernel(cask_cudnn_train::ComputeWg",
        "cask_cudnn_train::computeWgradSplitKOffsetsKernel(cask_cudnn_train::Comp",
        "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
        "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
        "cudnn_infer_volta_scudnn_128x128_relu_medium_nn_v1",
        "cudnn_infer_volta_scudnn_128x128_relu_small_nn_v1",
        "cudnn_infer_volta_scudnn_128x128_stridedB_small_nn_v1",
        "cudnn_infer_volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_medium_nhwc_tn_v",
        "cudnn_infer_volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_small_nhwc_tn_v1",
        "cudnn_infer_volta_scudnn_128x64_3dconv_fprop_medium_nn_v1",
        "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1",
        "cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1",
        "cudnn_infer_volta_scudnn_128x64_relu_xregs_large_nn_v1",
        "cudnn_infer_volta_scudnn_128x64_stridedB_interior_nn_v1",
        "cudnn_infer_volta_scudnn_128x64_stridedB_small_nn_v1",
        "cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
        "cudnn_train_volta_scudnn_128x128_stridedB_splitK_interior_nn_v1",
        "cudnn_train_volta_scudnn_128x128_stridedB_splitK_medium_nn_v1",
        "cudnn_train_volta_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1",
        "sm80_xmma_dgrad_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize",
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_",
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize",
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_",
        "void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeO",
        "void cask_cudnn_infer::computeOffsetsKernel3D<false>(cask_cudnn_infer::C",
        "void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_inf",
        "void cask_cudnn_infer::computeOffsetsKernel<true, false>(cask_cudnn_infe",
        "void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_param",
        "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void cons",
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512",
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512",
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512",
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, ",
        "void cudnn::winograd::generateWinogradTilesKernel<0, float, float>(cudnn",
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudn",
        "void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>(cu",
        "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cu",
        "void cudnn::winograd_nonfused::winogradWgradData4x4<float, float>(cudnn:",
        "void cudnn::winograd_nonfused::winogradWgradDelta4x4<float, float>(cudnn",
        "void cudnn::winograd_nonfused::winogradWgradOutput4x4<float, float>(cudn",
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_t",
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_t",
        "void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel:",
        "void cutlass_cudnn_train::Kernel<cutlass_tensorop_s1688wgrad_optimized_t",
        "void explicit_convolve_sgemm<float, int, 1024, 5, 5, 3, 3, 3, 0, false>(",
        "void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*, floa",
        "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int",
        "void fft2d_r2c_32x32<float, false, 5u, true>(float2*, float const*, int,",
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false",
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false,",
        "void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false,",
        "void implicit_convolve_sgemm<float, float, 512, 6, 8, 3, 3, 5, 1, false,",
        "void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, ",
        "void wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, ",
        "void wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, ",
        "volta_scudnn_128x128_relu_interior_nn_v1",
        "volta_scudnn_128x128_stridedB_interior_nn_v1",
        "volta_scudnn_128x128_stridedB_medium_nn_v1",
        "volta_scudnn_128x128_stridedB_small_nn_v1",
        "volta_scudnn_128x128_stridedB_splitK_medium_nn_v1",
        "volta_scudnn_128x128_stridedB_splitK_small_nn_v1",
        "volta_scudnn_128x32_sliced1x4_ldg4_relu_exp_medium_nhwc_tn_v1",
        "volta_scudnn_128x64_relu_interior_nn_v1",
        "volta_scudnn_128x64_relu_medium_nn_v1",
        "volta_scudnn_128x64_relu_small_nn_v1",
        "volta_scudnn_128x64_relu_xregs_large_nn_v1",
        "volta_scudnn_128x64_stridedB_interior_nn_v1",
        "volta_scudnn_128x64_stridedB_small_nn_v1",
        "volta_scudnn_128x64_stridedB_splitK_xregs_large_nn_v1",
        "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
    ),
    KernelKind.EMBEDDING: (
        "split_embedding_backward_codegen_rowwise_adagrad_unweighted_find_long_se",
        "split_embedding_backward_codegen_rowwise_adagrad_weighted_find_long_segm",
        "void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAcc",
        "void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel",
        "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kerne",
        "void fbgemm_gpu::(anonymous namespace)::_get_FP8_qparam_cuda_kernel<floa",
        "void fbgemm_gpu::_offsets_range_cuda_kernel<int>(long, long, int const*,",
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullpt",
        "void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*, in",
        "void fbgemm_gpu::permute_indices_weights_kernel<false, int, decltype(nul",
        "void linearize_index_kernel<long>(at::GenericPackedTensorAccessor<long, ",
        "void permute_pooled_embs_kernel<float>(float const*, long const*, long c",
        "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_",
        "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_ct",
        "void split_embedding_backward_codegen_rowwise_adagrad_weighted_kernel_wa",
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::H",
        "void split_embedding_codegen_forward_weighted_kernel<c10::Half, c10::Hal",
        "void split_embedding_codegen_grad_indice_weights_kernel<c10::Half, float",
    ),
    KernelKind.OTHER: (
        "dma_request",
        "event_record",
        "event_wait",
        "merge",
        "pe_exe",
        "remote",
        "void compute_cuda_kernel<long>(long*, long*, long*, long, long)",
        "void cub::DeviceRadixSortExclusiveSumKernel<cub::DeviceRadixSortPolicy<l",
        "void cub::DeviceRadixSortHistogramKernel<cub::DeviceRadixSortPolicy<long",
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long,",
        "void cudnn::ops::scalePackedTensor_kernel<float, float>(cudnnTensor4dStr",
        "void cudnn::ops::scalePackedTensor_kernel<float, float>(long, float*, fl",
    ),
}


@pytest.mark.fixtures
def test_every_fixture_kernel_name_has_its_hand_label(shared_fixtures: Path) -> None:
    expected = {prefix: kind for kind, prefixes in FIXTURE_KINDS.items() for prefix in prefixes}
    seen: set[str] = set()
    wrong: list[tuple[str, str, str]] = []
    for name in _fixture_kernel_names(shared_fixtures / "traces"):
        prefix = name[:72]
        assert prefix in expected, f"a fixture kernel has no hand label: {prefix!r}"
        seen.add(prefix)
        got = KernelKind.of(name)
        if got is not expected[prefix]:
            wrong.append((prefix, got.value, expected[prefix].value))
    assert not wrong, wrong
    assert seen == set(expected), sorted(set(expected) - seen)


def _fixture_kernel_names(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".md"):
            continue
        raw = path.read_bytes()
        data: object = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = data["traceEvents"] if isinstance(data, dict) else data
        assert isinstance(events, list)
        for event in events:
            if (
                isinstance(event, dict)
                and event.get("ph") == "X"
                and event.get("cat") in ("kernel", "Kernel", "mtia_ccp_events")
            ):
                names.add(str(event.get("name")))
    return names


@given(tables(), tables())
def test_jobs_partition_the_sources_and_keep_every_world_size(
    a: KernelTable, b: KernelTable
) -> None:
    merged = a + b
    jobs = merged.jobs()
    flat = [source for job in jobs for source in job]
    assert sorted(flat, key=repr) == sorted(merged.sources, key=repr)
    for job in jobs:
        assert len({source.world_size for source in job}) == 1
        ranks = [source.rank for source in job if source.rank is not None]
        assert len(ranks) == len(set(ranks))
    assert jobs == (b + a).jobs()
