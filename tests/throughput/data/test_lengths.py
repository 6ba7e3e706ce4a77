"""Length input, LengthStats, padding waste and the CE chunk plan.

The waste figures are checked against brute-force loops written independently of
the vectorised code: one slot per token position, one score per (query, key) pair.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise.errors import InputFileError, InvalidInputError, LengthInputError
from probewise.throughput.data.length_input import LengthInput, as_lengths, read_lengths
from probewise.throughput.data.lengths import (
    MAX_BINS_PER_OCTAVE,
    BatchingMode,
    ChunkPlan,
    LengthStats,
    LogitsDtype,
    PaddingReport,
    ce_chunk_plan,
    exact_dot,
    exact_max_product,
    padding_waste,
)

small_lengths = st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=60)

# ---------------------------------------------------------------------------------------
# Brute force: the model's point of view, one slot at a time


def brute_batches(lengths: list[int], batches: list[list[int]]) -> tuple[int, int, int, int]:
    """(real, slots, attention real, attention slots) by walking every slot."""
    real = slots = att_real = att_slots = 0
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        for i in batch:
            for _position in range(longest):
                slots += 1
            real += lengths[i]
            att_real += lengths[i] * lengths[i]
            att_slots += longest * longest
    return real, slots, att_real, att_slots


def brute_token_budget(lengths: list[int], budget: int) -> list[list[int]]:
    """Greedy: add the next sequence while the padded batch stays within the budget."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i, _length in enumerate(lengths):
        candidate = [*current, i]
        padded = len(candidate) * max(lengths[j] for j in candidate)
        if current and padded > budget:
            batches.append(current)
            current = [i]
        else:
            current = candidate
    if current:
        batches.append(current)
    return batches


def brute_packing(lengths: list[int], width: int) -> tuple[int, int, int, int]:
    """(rows, real, block-diagonal attention, split sequences) by laying tokens in rows."""
    owner: list[int] = []
    for i, length in enumerate(lengths):
        owner.extend([i] * length)
    rows = [owner[r : r + width] for r in range(0, len(owner), width)]
    att = 0
    rows_of: dict[int, set[int]] = {}
    for r, row in enumerate(rows):
        for i in set(row):
            piece = row.count(i)
            att += piece * piece
            rows_of.setdefault(i, set()).add(r)
    split = sum(1 for r in rows_of.values() if len(r) > 1)
    return len(rows), len(owner), att, split


# ---------------------------------------------------------------------------------------
# Padding waste


def figures(report: PaddingReport) -> tuple[int, int, int, int]:
    return report.real_tokens, report.slot_tokens, report.attention_real, report.attention_slots


@given(small_lengths, st.integers(min_value=1, max_value=9))
def test_batch_size_waste_equals_brute_force(lengths: list[int], batch_size: int) -> None:
    report = padding_waste(lengths, batch_size=batch_size)
    batches = [
        list(range(s, min(s + batch_size, len(lengths))))
        for s in range(0, len(lengths), batch_size)
    ]
    real, slots, att_real, att_slots = brute_batches(lengths, batches)
    assert report.mode is BatchingMode.BATCH_SIZE
    assert (report.real_tokens, report.slot_tokens) == (real, slots)
    assert (report.attention_real, report.attention_slots) == (att_real, att_slots)
    assert report.n_batches == len(batches)
    assert report.pad_tokens == slots - real
    assert report.waste_share == pytest.approx((slots - real) / slots)
    assert report.largest_batch_slots == max(len(b) * max(lengths[i] for i in b) for b in batches)


@given(small_lengths, st.data())
def test_explicit_batches_equal_brute_force(lengths: list[int], data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(lengths))))
    keep = data.draw(st.integers(min_value=1, max_value=len(lengths)))
    placed = list(order[:keep])
    cuts = sorted(
        data.draw(st.sets(st.integers(min_value=1, max_value=max(keep - 1, 1)), max_size=keep))
    )
    cuts = [c for c in cuts if 0 < c < keep]
    bounds = [0, *cuts, keep]
    batches = [placed[a:b] for a, b in itertools.pairwise(bounds)]
    report = padding_waste(lengths, batches)
    assert report.mode is BatchingMode.EXPLICIT
    assert figures(report) == brute_batches(lengths, batches)
    assert report.unbatched == len(lengths) - keep
    assert report.n_sequences == keep


@given(small_lengths, st.integers(min_value=1, max_value=300))
def test_token_budget_equals_brute_force(lengths: list[int], budget: int) -> None:
    report = padding_waste(lengths, tokens_per_batch=budget)
    batches = brute_token_budget(lengths, budget)
    assert report.mode is BatchingMode.TOKEN_BUDGET
    assert report.n_batches == len(batches)
    assert figures(report) == brute_batches(lengths, batches)
    assert report.oversize == sum(1 for x in lengths if x > budget)


@given(small_lengths, st.integers(min_value=1, max_value=100))
def test_packing_equals_brute_force(lengths: list[int], width: int) -> None:
    report = padding_waste(lengths, pack_to=width)
    rows, real, att, split = brute_packing(lengths, width)
    assert report.mode is BatchingMode.PACKED
    assert (report.n_batches, report.real_tokens, report.slot_tokens) == (rows, real, rows * width)
    assert report.attention_real == att
    assert report.attention_slots == rows * width * width
    assert report.split_sequences == split
    assert report.efficiency == pytest.approx(real / (rows * width))


def test_packing_attention_share_worked_example() -> None:
    # Rows of 8: [3 3 3 5 5 5 5 5] [2 2 _ ...]: pieces 3, 5 and 2 -> 9 + 25 + 4 = 38.
    report = padding_waste([3, 5, 2], pack_to=8)
    assert (report.n_batches, report.attention_real, report.attention_slots) == (2, 38, 128)
    assert report.attention_share == pytest.approx(38 / 128)
    assert report.split_sequences == 0


def test_huge_lengths_sum_squares_exactly() -> None:
    # 2**40 squared passes int64: the sums must still be exact.
    big = 2**40
    report = padding_waste([big, big, 1], batch_size=2)
    assert report.attention_real == 2 * big * big + 1
    assert report.attention_slots == 2 * big * big + 1


def test_padding_waste_needs_exactly_one_batching() -> None:
    with pytest.raises(InvalidInputError, match="exactly one"):
        padding_waste([1, 2])
    with pytest.raises(InvalidInputError, match="exactly one"):
        padding_waste([1, 2], batch_size=1, pack_to=4)


@pytest.mark.parametrize(
    ("batches", "match"),
    [
        ([[0, 1], [1]], "more than one batch"),
        ([[0, 5]], "outside"),
        ([[-1]], "outside"),
        ([[]], "non-empty"),
        ([[0.5]], "integers"),
        ([], "no batches"),
    ],
)
def test_explicit_batches_reject_bad_indices(batches: list[list[float]], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        padding_waste([1, 2, 3], batches)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"tokens_per_batch": 0}, {"pack_to": -3}])
def test_non_positive_batching_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidInputError, match=">= 1"):
        padding_waste([1, 2], **kwargs)  # type: ignore[arg-type]


def test_report_to_dict_is_json() -> None:
    report = padding_waste([4, 1, 7], batch_size=2)
    decoded = json.loads(json.dumps(report.to_dict()))
    assert decoded["mode"] == "batch_size"
    assert decoded["pad_tokens"] == report.pad_tokens
    assert isinstance(report, PaddingReport)


# ---------------------------------------------------------------------------------------
# Length validation and files


@pytest.mark.parametrize(
    ("values", "index", "match"),
    [
        ([3, 0, 2], 1, "positive"),
        ([3, 4, -2], 2, "positive"),
        ([1.0, 2.5], 1, "integer"),
        ([1.0, math.nan], 1, "NaN"),
        ([math.inf], 0, "infinite"),
        ([1, "7"], 1, "integer"),
        ([True, 2], 0, "boolean"),
        ([1, None], 1, "integer"),
    ],
)
def test_bad_lengths_name_the_index(values: list[object], index: int, match: str) -> None:
    with pytest.raises(LengthInputError, match=match) as caught:
        as_lengths(values)  # type: ignore[arg-type]
    assert caught.value.index == index
    assert f"index {index}" in str(caught.value)


def test_empty_and_misshapen_lengths_rejected() -> None:
    with pytest.raises(LengthInputError, match="empty"):
        as_lengths([])
    with pytest.raises(InvalidInputError, match="one-dimensional"):
        as_lengths(np.ones((2, 2), dtype=np.int64))
    with pytest.raises(InvalidInputError, match="string"):
        as_lengths("123")  # type: ignore[arg-type]


def test_whole_floats_and_unsigned_arrays_accepted_read_only() -> None:
    out = as_lengths(np.array([3.0, 5.0]))
    assert out.dtype == np.int64
    assert out.tolist() == [3, 5]
    assert not out.flags.writeable
    assert as_lengths(np.array([7, 9], dtype=np.uint8)).tolist() == [7, 9]
    with pytest.raises(LengthInputError, match="positive"):
        as_lengths(np.array([4, 0], dtype=np.uint32))


def test_read_text_file(tmp_path: Path) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text("12\n 7\n3\n\n\n")
    result = read_lengths(path)
    assert result.lengths.tolist() == [12, 7, 3]
    assert result.source_codes is None
    assert result.sources() is None
    assert result.path == str(path)
    assert "n=3" in repr(result)


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("4\n5\n0\n", 3, "positive"),
        ("4\n-1\n", 2, "positive"),
        ("4\n\n5\n", 2, "blank"),
        ("4\n2.5\n", 2, "not an integer"),
        ("4\nnan\n", 2, "not an integer"),
        ("abc\n", 1, "not an integer"),
        ("\x1c1\n", 1, "not an integer"),  # str.strip() drops \x1c, int() does not
        ("4\n7\x1f\n", 2, "not an integer"),
        ("4\n99999999999999999999\n", 2, "above the bound of 2\\*\\*40"),
        ("4\n1099511627777\n", 2, "above the bound of 2\\*\\*40"),
    ],
)
def test_bad_text_lines_named(tmp_path: Path, text: str, line: int, match: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(LengthInputError, match=match) as caught:
        read_lengths(path)
    assert caught.value.line == line
    assert f"{path}:{line}" in str(caught.value)


def test_empty_file_rejected(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("\n  \n")
    with pytest.raises(LengthInputError, match="empty"):
        read_lengths(path)
    with pytest.raises(InputFileError):
        read_lengths(tmp_path / "missing.txt")


def test_read_jsonl_with_sources_and_gzip(tmp_path: Path) -> None:
    records = [
        {"length": 10, "src": "web"},
        {"length": 4, "src": "code"},
        {"length": 6.0, "src": "web"},
        {"length": 1, "src": 3},
    ]
    body = "".join(json.dumps(r) + "\n" for r in records)
    path = tmp_path / "data.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(body)
    result = read_lengths(path, source_field="src")
    assert result.lengths.tolist() == [10, 4, 6, 1]
    assert result.source_names == ("web", "code", "3")
    assert result.source_codes is not None
    assert result.source_codes.tolist() == [0, 1, 0, 2]
    assert result.sources() == ("web", "code", "web", "3")
    custom = tmp_path / "n.jsonl"
    custom.write_text('{"n": 5}\n{"n": 8}\n')
    assert read_lengths(custom, field="n").lengths.tolist() == [5, 8]


@pytest.mark.parametrize(
    ("lines", "line", "match"),
    [
        (['{"length": 3}', '{"len": 3}'], 2, "no 'length' field"),
        (['{"length": 3}', '{"length": NaN}'], 2, "NaN"),
        (['{"length": 3}', '{"length": 2.5}'], 2, "integer"),
        (['{"length": 3}', '{"length": "7"}'], 2, "integer"),
        (['{"length": 3}', '{"length": 0}'], 2, "positive"),
        (['{"length": 3}', "[1]"], 2, "JSON object"),
        (['{"length": 3}', "{oops"], 2, "invalid JSON"),
        (['{"length": 3}', "", '{"length": 3}'], 2, "blank"),
        (['{"length": 3, "s": "a"}', '{"length": 3}'], 2, "no 's' field"),
        (['{"length": 3, "s": null}'], 1, "string or an int"),
    ],
)
def test_bad_jsonl_lines_named(tmp_path: Path, lines: list[str], line: int, match: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LengthInputError, match=match) as caught:
        read_lengths(path, source_field="s" if "s" in lines[0] else None)
    assert caught.value.line == line


def test_source_field_needs_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_text("3\n")
    with pytest.raises(LengthInputError, match="JSONL"):
        read_lengths(path, source_field="src")


@given(st.lists(st.integers(min_value=1, max_value=10**12), min_size=1, max_size=50))
def test_text_and_jsonl_round_trip(values: list[int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "a.txt"
        text.write_text("".join(f"{v}\n" for v in values))
        jsonl = Path(tmp) / "a.jsonl"
        jsonl.write_text("".join(json.dumps({"length": v}) + "\n" for v in values))
        assert read_lengths(text).lengths.tolist() == values
        assert read_lengths(jsonl).lengths.tolist() == values


@given(st.text(max_size=200))
def test_read_lengths_fuzz_raises_only_length_errors(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            result = read_lengths(path)
        except LengthInputError:
            return
        assert int(result.lengths.min()) >= 1


def test_length_input_validates_sources() -> None:
    with pytest.raises(InvalidInputError, match="one code per length"):
        LengthInput(lengths=[1, 2], source_codes=np.zeros(3, dtype=np.int32), source_names=("a",))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="index into"):
        LengthInput(
            lengths=[1, 2], source_codes=np.array([0, 1], dtype=np.int32), source_names=("a",)
        )  # type: ignore[arg-type]
    with pytest.raises(LengthInputError, match="positive"):
        LengthInput(lengths=[1, 0])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# LengthStats


@given(
    st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=300),
    st.integers(1, 4),
)
def test_length_stats_match_numpy_and_histogram_covers(values: list[int], per_octave: int) -> None:
    stats = LengthStats.of(values, bins_per_octave=per_octave)
    array = np.array(values)
    assert stats.count == len(values)
    assert stats.total_tokens == sum(values)
    assert (stats.min, stats.max) == (min(values), max(values))
    assert stats.mean == pytest.approx(float(array.mean()))
    assert stats.std == pytest.approx(float(array.std()), abs=1e-9)
    assert stats.p90 == pytest.approx(float(np.percentile(array, 90)))
    bins = stats.histogram
    assert bins[0].lo <= stats.min < bins[0].hi
    assert bins[-1].lo <= stats.max < bins[-1].hi
    assert all(a.hi == b.lo for a, b in itertools.pairwise(bins))
    for b in bins:
        assert b.count == sum(1 for v in values if b.lo <= v < b.hi)
    # Log spacing: a bin spans at most a factor 2**(1/k) (rounded to whole tokens).
    for b in bins:
        if b.lo >= 8 * per_octave:
            assert b.hi / b.lo <= 2 ** (1 / per_octave) * 1.15


def test_length_stats_reject_bad_input() -> None:
    with pytest.raises(LengthInputError):
        LengthStats.of([])
    with pytest.raises(InvalidInputError):
        LengthStats.of([1, 2], bins_per_octave=0)
    assert json.loads(json.dumps(LengthStats.of([5, 9]).to_dict()))["count"] == 2


# ---------------------------------------------------------------------------------------
# CE chunk plan


def test_chunk_plan_issue_figures() -> None:
    tokens, vocab = 262_144, 16_384
    assert tokens * vocab == 2**32
    fp32 = ce_chunk_plan(tokens, vocab, budget_bytes=2**40, logits_dtype="fp32")
    bf16 = ce_chunk_plan(tokens, vocab, budget_bytes=2**40, logits_dtype=LogitsDtype.BFLOAT16)
    assert fp32.logits_bytes == 16 * 2**30
    assert bf16.logits_bytes == 8 * 2**30
    assert fp32.fits_unchunked
    assert fp32.n_chunks == 1
    assert fp32.chunk_tokens == tokens


def test_chunk_plan_sizes_chunk_to_budget() -> None:
    plan = ce_chunk_plan(262_144, 16_384, budget_bytes=8 * 2**30, bytes_per_logit=12.3)
    assert plan.bytes_per_logit_measured
    per_token = 16_384 * 12.3
    assert plan.chunk_tokens == math.floor(8 * 2**30 / per_token)
    assert plan.peak_bytes_chunked <= plan.budget_bytes
    assert (plan.chunk_tokens + 1) * per_token > plan.budget_bytes
    assert plan.n_chunks == math.ceil(262_144 / plan.chunk_tokens)
    assert plan.peak_bytes_unchunked == math.ceil(2**32 * 12.3)
    assert not plan.fits_unchunked
    default = ce_chunk_plan(1000, 100, budget_bytes=10**9)
    assert default.bytes_per_logit == 14.0
    assert not default.bytes_per_logit_measured
    assert (
        ce_chunk_plan(1000, 100, budget_bytes=10**9, logits_dtype="float32").bytes_per_logit == 16.0
    )


@given(
    st.integers(1, 10**6),
    st.integers(2, 300_000),
    st.integers(1, 2**36),
    st.floats(0.5, 64),
    st.integers(1, 128),
)
def test_chunk_plan_invariants(
    tokens: int, vocab: int, budget: int, bpl: float, multiple: int
) -> None:
    try:
        plan = ce_chunk_plan(
            tokens, vocab, budget_bytes=budget, bytes_per_logit=bpl, multiple_of=multiple
        )
    except InvalidInputError:
        assert vocab * bpl > budget
        return
    assert isinstance(plan, ChunkPlan)
    assert 1 <= plan.chunk_tokens <= tokens
    assert plan.chunk_tokens * vocab * bpl <= budget * (1 + 1e-12)
    assert plan.n_chunks * plan.chunk_tokens >= tokens > (plan.n_chunks - 1) * plan.chunk_tokens
    if plan.chunk_tokens < tokens and plan.chunk_tokens >= multiple:
        assert plan.chunk_tokens % multiple == 0
    json.dumps(plan.to_dict())


def test_chunk_plan_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidInputError, match="holds no token"):
        ce_chunk_plan(10, 1000, budget_bytes=100)
    with pytest.raises(InvalidInputError, match="unknown logits dtype"):
        ce_chunk_plan(10, 10, budget_bytes=10**6, logits_dtype="int8")
    for kwargs in ({"budget_bytes": 0}, {"budget_bytes": 10, "bytes_per_logit": math.nan}):
        with pytest.raises(InvalidInputError):
            ce_chunk_plan(10, 10, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        ce_chunk_plan(0, 10, budget_bytes=10)


# ---------------------------------------------------------------------------------------
# Tokenized lengths, with a tokenizer built here (nothing from a hub)


@pytest.fixture(scope="module")
def word_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[BOS]": 1, "alpha": 2, "beta": 3, "gamma": 4}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", bos_token="[BOS]")
    directory = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(str(directory))
    return directory


def test_tokenize_lengths_counts_tokens(tmp_path: Path, word_tokenizer_dir: Path) -> None:
    from probewise.throughput.data.length_input import tokenize_lengths

    path = tmp_path / "texts.jsonl"
    rows = [
        {"text": "alpha beta", "src": "a"},
        {"text": "gamma gamma gamma zeta", "src": "b"},
        {"text": "beta", "src": "a"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = tokenize_lengths(
        path, word_tokenizer_dir, source_field="src", batch_size=2, progress=False
    )
    assert result.lengths.tolist() == [2, 4, 1]
    assert result.sources() == ("a", "b", "a")


def test_tokenize_lengths_names_bad_lines(tmp_path: Path, word_tokenizer_dir: Path) -> None:
    from probewise.throughput.data.length_input import tokenize_lengths

    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "alpha"}\n{"body": "beta"}\n')
    with pytest.raises(LengthInputError, match="no 'text' field") as caught:
        tokenize_lengths(path, word_tokenizer_dir, progress=False)
    assert caught.value.line == 2
    path.write_text('{"text": "alpha"}\n{"text": ""}\n')
    with pytest.raises(LengthInputError, match="no tokens") as caught:
        tokenize_lengths(path, word_tokenizer_dir, progress=False)
    assert caught.value.line == 2
    path.write_text('{"text": 5}\n')
    with pytest.raises(LengthInputError, match="must be a string"):
        tokenize_lengths(path, word_tokenizer_dir, progress=False)
    with pytest.raises(InputFileError):
        tokenize_lengths(path, tmp_path / "no-such-tokenizer", progress=False)
    with pytest.raises(InvalidInputError, match="batch_size"):
        tokenize_lengths(path, word_tokenizer_dir, batch_size=0)


def test_tokenize_progress_goes_to_stderr_only(
    tmp_path: Path, word_tokenizer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from probewise.throughput.data.length_input import tokenize_lengths

    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": "alpha beta"}) + "\n" for _ in range(5)))
    tokenize_lengths(path, word_tokenizer_dir, batch_size=2, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "5/5 texts" in captured.err


# ---------------------------------------------------------------------------------------
# Bounds and exact arithmetic (issue 19): lengths at most 2**40, no int64 wrap-around


def test_lengths_above_the_bound_are_named() -> None:
    bound = 2**40
    assert as_lengths([bound]).tolist() == [bound]
    for values in (
        [3, bound + 1],
        np.array([3, bound + 1], dtype=np.int64),
        np.array([3, bound + 1], dtype=np.uint64),
        np.array([3.0, float(2**41)]),
        [3, 10**5000],
        np.array([3, bound + 1], dtype=object),
    ):
        with pytest.raises(LengthInputError, match=r"above the bound of 2\*\*40") as caught:
            as_lengths(values)
        assert caught.value.index == 1


def test_a_huge_negative_length_is_named_without_printing_it() -> None:
    with pytest.raises(LengthInputError, match="a 16610-bit number") as caught:
        as_lengths([1, -(10**5000)])
    assert caught.value.index == 1


def reference_packed_attention(lengths: list[int], width: int) -> int:
    """Block-diagonal attention work of ``group_texts`` packing, piece by piece, in Python ints."""
    total = 0
    offset = 0
    for length in lengths:
        start, end = offset, offset + length
        while start < end:
            row_end = (start // width + 1) * width
            piece = min(end, row_end) - start
            total += piece * piece
            start += piece
        offset = end
    return total


@given(
    st.lists(st.integers(min_value=1, max_value=2**40), min_size=1, max_size=6),
    st.integers(min_value=2**20, max_value=2**40),
)
def test_packed_attention_is_exact_for_long_lengths(lengths: list[int], width: int) -> None:
    report = padding_waste(lengths, pack_to=width)
    assert report.attention_real == reference_packed_attention(lengths, width)
    assert report.real_tokens == sum(lengths)
    rows = -(-sum(lengths) // width)
    assert report.attention_slots == rows * width * width


def test_padded_figures_are_exact_past_int64() -> None:
    lengths = [2**40, 2**40 - 1, 3, 2**39]
    report = padding_waste(lengths, batch_size=4)
    assert report.slot_tokens == 4 * 2**40
    assert report.attention_slots == 4 * 2**80
    assert report.attention_real == sum(x * x for x in lengths)


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2**40),
            st.integers(min_value=0, max_value=2**40),
            st.integers(min_value=0, max_value=2**40),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_exact_dot_and_max_product_match_python_ints(rows: list[tuple[int, int, int]]) -> None:
    a, b, c = (np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))
    assert exact_dot(a) == sum(r[0] for r in rows)
    assert exact_dot(a, b) == sum(r[0] * r[1] for r in rows)
    assert exact_dot(a, b, c) == sum(r[0] * r[1] * r[2] for r in rows)
    assert exact_dot(c, a, b) == sum(r[0] * r[1] * r[2] for r in rows)
    assert exact_max_product(a, b) == max(r[0] * r[1] for r in rows)


def test_pack_to_and_batch_size_beyond_int64_are_handled() -> None:
    with pytest.raises(InvalidInputError, match=r"at most 2\*\*40"):
        padding_waste([3, 4], pack_to=10**30)
    report = padding_waste([3, 4, 5], batch_size=10**30)
    assert (report.n_batches, report.slot_tokens) == (1, 15)


def test_bins_per_octave_is_capped() -> None:
    assert len(LengthStats.of([1, 2**40], bins_per_octave=MAX_BINS_PER_OCTAVE).histogram) > 0
    for bad in (MAX_BINS_PER_OCTAVE + 1, 10**8, 0):
        with pytest.raises(InvalidInputError, match="bins_per_octave must be between 1 and 256"):
            LengthStats.of([1, 2], bins_per_octave=bad)


@pytest.mark.parametrize("name", ["tokens", "vocab_size", "budget_bytes", "multiple_of"])
def test_ce_chunk_plan_refuses_integers_too_large_for_floats(name: str) -> None:
    kwargs: dict[str, int] = {"tokens": 5, "vocab_size": 10, "budget_bytes": 10**9}
    kwargs[name] = 10**400
    with pytest.raises(InvalidInputError, match=rf"{name} must be between 1 and 2\*\*100"):
        ce_chunk_plan(**kwargs)


# ---------------------------------------------------------------------------------------
# Damaged files (issue 19): typed errors naming the file and line, never a hang


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "lengths.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_lengths(fifo)
            outcome.append(None)
        except BaseException as error:  # the test inspects it below
            outcome.append(error)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # blocked in open(): release it by opening the write end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=10)
        pytest.fail("read_lengths blocked on a FIFO")
    assert len(outcome) == 1
    assert isinstance(outcome[0], InputFileError)
    assert isinstance(outcome[0], OSError)
    assert "FIFO" in str(outcome[0])
    assert str(fifo) in str(outcome[0])


def test_folders_and_symlink_loops_are_input_file_errors(tmp_path: Path) -> None:
    loop_a, loop_b = tmp_path / "a", tmp_path / "b"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    for path, match in ((loop_a, "symbolic links"), (tmp_path, "a folder")):
        with pytest.raises(InputFileError, match=match) as caught:
            read_lengths(path)
        assert caught.value.path == str(path)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (gzip.compress(b"1\n2\n" * 500)[:-30], "gzip stream is damaged or truncated"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 50, "damaged or truncated"),
        (b"4\n\xff\xfe\n", "not UTF-8"),
        (b'{"length": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested too deeply"),
    ],
)
def test_damaged_files_are_length_input_errors(tmp_path: Path, data: bytes, match: str) -> None:
    path = tmp_path / "damaged"
    path.write_bytes(data)
    with pytest.raises(LengthInputError, match=match) as caught:
        read_lengths(path)
    assert str(path) in str(caught.value)


def test_a_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf5\n6\n")
    assert read_lengths(path).lengths.tolist() == [5, 6]
    path.write_bytes(b'\xef\xbb\xbf{"length": 7}\n')
    assert read_lengths(path).lengths.tolist() == [7]


@pytest.mark.parametrize("separator", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
def test_only_newlines_break_lines(tmp_path: Path, separator: str) -> None:
    """A vertical tab or form feed inside a line is not a line break: "5\\x0b6" is no length."""
    path = tmp_path / "odd.txt"
    path.write_text(f"4\n5{separator}6\n7\n", encoding="utf-8")
    with pytest.raises(LengthInputError, match="not an integer") as caught:
        read_lengths(path)
    assert caught.value.line == 2
    path.write_bytes(b"4\r\n5\r6\n")
    assert read_lengths(path).lengths.tolist() == [4, 5, 6]
