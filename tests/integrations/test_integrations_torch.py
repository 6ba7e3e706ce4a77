"""check_forward in a plain PyTorch loop, against the perturbation ground truth.

A tiny random Llama (its config's ``use_cache=True``, as published Llama configs
have) takes batches from transformers' ``DataCollatorWithFlattening``: one row of
documents marked by restarting ``position_ids``. Every verdict of
:func:`check_forward` is compared with what the real forward does when the first
document changes (tests/integrations/_ground_truth.py).
"""

from __future__ import annotations

import logging

import pytest
from _ground_truth import leaks, tiny_llama
from hypothesis import given
from hypothesis import strategies as st

from probewise import CrossDocumentAttentionError, InvalidInputError, UnsupportedModelError

# Private: the document reader is held to transformers' own on random positions, with no model.
from probewise.integrations._batch import documents_of
from probewise.integrations.torch import check_forward, forward_scenario
from probewise.throughput.attention.masks import Packing, Padding

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import masking_utils  # noqa: E402

DOCUMENTS = (5, 7, 4)


def features() -> list[dict[str, list[int]]]:
    return [
        {"input_ids": [3 + (7 * i + j) % 50 for j in range(n)]} for i, n in enumerate(DOCUMENTS)
    ]


def flattened(**options: bool) -> dict[str, object]:
    return dict(transformers.DataCollatorWithFlattening(**options)(features()))


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    built = tiny_llama(use_cache=True)
    built.train()
    return built


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("flash_kwargs", [False, True], ids=["position_ids", "cu_seq_lens"])
def test_the_configs_use_cache_leaks_and_check_forward_raises(
    model: torch.nn.Module, flash_kwargs: bool
) -> None:
    batch = flattened(return_flash_attn_kwargs=flash_kwargs)
    before = snapshot(model)
    assert leaks(model, batch)
    with pytest.raises(CrossDocumentAttentionError, match="use_cache=False") as caught:
        check_forward(model, batch)
    assert "use_cache=True from the config" in str(caught.value)
    after = snapshot(model)
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights untouched
    assert model.training


def test_use_cache_false_in_the_call_passes(model: torch.nn.Module) -> None:
    batch = flattened()
    assert not leaks(model, batch, use_cache=False)
    report = check_forward(model, batch, use_cache=False)
    assert report.scenario.packing is Packing.POSITION_IDS
    assert report.scenario.documents == DOCUMENTS
    assert report.scenario.use_cache is False
    assert not report.kv_cache
    assert report.cross_document_layers() == ()
    assert [layer.cross_document for layer in report.layers] == [False, False]


def test_gradient_checkpointing_passes() -> None:
    model = tiny_llama(use_cache=True)
    model.train()
    model.activation_checkpointing_enable()
    batch = flattened()
    assert not leaks(model, batch)
    report = check_forward(model, batch)
    assert report.scenario.gradient_checkpointing
    assert not report.kv_cache
    assert report.cross_document_layers() == ()


def test_warn_logs_the_leak_and_returns_the_report(
    model: torch.nn.Module, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="probewise"):
        report = check_forward(model, flattened(), on_leak="warn")
    assert report.kv_cache
    assert [layer.index for layer in report.cross_document_layers()] == [0, 1]
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "packed documents attend to each other" in caplog.records[0].getMessage()


def test_eval_mode_under_no_grad_keeps_the_cache_and_leaks() -> None:
    model = tiny_llama(use_cache=True)
    model.eval()
    model.activation_checkpointing_enable()  # changes nothing outside training
    batch = flattened()
    assert leaks(model, batch)
    with pytest.raises(CrossDocumentAttentionError):
        check_forward(model, batch)


def test_a_padded_batch_is_read_as_padding_and_nothing_crosses(model: torch.nn.Module) -> None:
    collator = transformers.DataCollatorWithPadding(_Tokenizer(), padding=True)
    batch = dict(collator(features()))
    scenario = forward_scenario(model, batch)
    assert scenario.padding is Padding.RIGHT
    assert scenario.lengths == DOCUMENTS
    report = check_forward(model, batch)
    assert all(layer.cross_document is None for layer in report.layers)


def test_an_all_ones_mask_with_restarting_positions_leaks_as_the_probe_says(
    model: torch.nn.Module,
) -> None:
    batch = flattened()
    batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    assert forward_scenario(model, batch).packing is Packing.ALL_ONES_MASK
    assert leaks(model, batch, use_cache=False)
    with pytest.raises(CrossDocumentAttentionError, match="attention mask"):
        check_forward(model, batch, use_cache=False)


def test_wrappers_are_looked_through(model: torch.nn.Module) -> None:
    class Wrapper(torch.nn.Module):  # what DDP and FSDP look like: the model at .module
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.module = inner

    report = check_forward(Wrapper(model), flattened(), use_cache=False)
    assert report.cross_document_layers() == ()


def test_what_is_refused_is_named(model: torch.nn.Module) -> None:
    with pytest.raises(UnsupportedModelError, match="not a transformers model"):
        check_forward(torch.nn.Linear(2, 2), flattened())
    with pytest.raises(InvalidInputError, match="no input_ids"):
        check_forward(model, {"position_ids": torch.arange(4)[None]})
    with pytest.raises(InvalidInputError, match="on_leak"):
        check_forward(model, flattened(), on_leak="ignore")  # type: ignore[arg-type]
    batch = flattened(return_flash_attn_kwargs=True)
    batch["cu_seq_lens_q"] = torch.tensor([0, 4, 16], dtype=torch.int32)
    with pytest.raises(InvalidInputError, match="disagree"):
        check_forward(model, batch)
    del batch["position_ids"]
    with pytest.raises(UnsupportedModelError, match="no position_ids"):
        check_forward(model, batch)


@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=6), min_size=2, max_size=24),
        min_size=1,
        max_size=3,
    ).filter(lambda rows: len({len(r) for r in rows}) == 1)
)
def test_documents_are_read_as_transformers_reads_them(rows: list[list[int]]) -> None:
    positions = torch.tensor(rows)
    ids = masking_utils.find_packed_sequence_indices(positions)
    for row, layout in zip(range(len(rows)), documents_of(positions.numpy()), strict=True):
        expected = (
            [len(rows[row])]
            if ids is None
            else torch.unique_consecutive(ids[row], return_counts=True)[1].tolist()
        )
        assert list(layout) == expected


class _Tokenizer:
    """What DataCollatorWithPadding asks of a tokenizer: its pad method (no vocabulary)."""

    padding_side = "right"
    pad_token_id = 0
    model_input_names = ("input_ids", "attention_mask")

    def pad(self, features: list[dict[str, list[int]]], **options: object) -> dict[str, object]:
        width = max(len(f["input_ids"]) for f in features)
        ids = [f["input_ids"] + [0] * (width - len(f["input_ids"])) for f in features]
        mask = [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features]
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
