"""Reading a batch back into its scenario (no torch): every padded or packed scenario the
probe can run, turned into the inputs the probe feeds its model, reads back as itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from probewise.errors import InvalidInputError, UnsupportedModelError

# Private: the batch reader runs on numpy batches built from scenarios, with no torch model.
from probewise.integrations._batch import scenario_of_batch
from probewise.throughput.attention._scenario import scenario_inputs
from probewise.throughput.attention.masks import MaskScenario, Packing, Padding


@st.composite
def scenarios(draw: st.DrawFn) -> MaskScenario:
    seq_len = draw(st.integers(min_value=2, max_value=40))
    batch = draw(st.integers(min_value=1, max_value=3))
    kind = draw(st.sampled_from(["plain", "right", "left", "position_ids", "all_ones_mask"]))
    flow = {
        "training": draw(st.booleans()),
        "use_cache": draw(st.sampled_from([None, True, False])),
        "gradient_checkpointing": draw(st.booleans()),
    }
    if kind in ("right", "left"):
        lengths = draw(
            st.lists(st.integers(1, seq_len), min_size=batch, max_size=batch).filter(
                lambda ns: min(ns) < seq_len
            )
        )
        return MaskScenario(
            seq_len=seq_len, batch=batch, padding=Padding(kind), lengths=lengths, **flow
        )
    if kind == "plain":
        return MaskScenario(seq_len=seq_len, batch=batch, **flow)
    cuts = sorted(draw(st.sets(st.integers(1, seq_len - 1), min_size=1, max_size=6)))
    documents = tuple(b - a for a, b in zip([0, *cuts], [*cuts, seq_len], strict=True))
    return MaskScenario(
        seq_len=seq_len, batch=batch, packing=Packing(kind), documents=documents, **flow
    )


@given(scenarios())
def test_a_scenarios_inputs_read_back_as_the_scenario(scenario: MaskScenario) -> None:
    input_ids, attention, positions = scenario_inputs(scenario)
    batch: dict[str, object] = {"input_ids": input_ids}
    if attention is not None:
        batch["attention_mask"] = attention
    if positions is not None:
        batch["position_ids"] = positions
        starts = np.cumsum([0, *scenario.documents])
        batch["cu_seq_lens_q"] = np.concatenate(
            [starts[:-1] + row * scenario.seq_len for row in range(scenario.batch)]
            + [np.array([scenario.batch * scenario.seq_len])]
        )
    read = scenario_of_batch(
        batch,
        training=scenario.training,
        use_cache=scenario.use_cache,
        gradient_checkpointing=scenario.gradient_checkpointing,
        attn_implementation=None,
    )
    assert read == scenario


@given(st.integers(2, 30), st.integers(1, 29))
def test_rows_packed_differently_are_probed_with_the_most_documents(seq_len: int, cut: int) -> None:
    assume(cut < seq_len)
    one = np.arange(seq_len)
    two = np.concatenate([np.arange(cut), np.arange(seq_len - cut)])
    batch = {
        "input_ids": np.zeros((2, seq_len), dtype=np.int64),
        "position_ids": np.stack([one, two]),
    }
    read = scenario_of_batch(
        batch, training=True, use_cache=None, gradient_checkpointing=False, attn_implementation=None
    )
    assert (read.batch, read.packing, read.documents) == (
        2,
        Packing.POSITION_IDS,
        (cut, seq_len - cut),
    )


def test_what_the_reader_refuses() -> None:
    ids = np.zeros((1, 4), dtype=np.int64)
    flow = {"training": True, "use_cache": None, "gradient_checkpointing": False}
    with pytest.raises(UnsupportedModelError, match="holes"):
        scenario_of_batch(
            {"input_ids": ids, "attention_mask": np.array([[1, 0, 1, 1]])},
            attn_implementation=None,
            **flow,
        )
    with pytest.raises(UnsupportedModelError, match="4-D mask"):
        scenario_of_batch(
            {"input_ids": ids, "attention_mask": np.ones((1, 1, 4, 4))},
            attn_implementation=None,
            **flow,
        )
    with pytest.raises(UnsupportedModelError, match="multimodal"):
        scenario_of_batch(
            {"input_ids": ids, "position_ids": np.zeros((3, 1, 4), dtype=np.int64)},
            attn_implementation=None,
            **flow,
        )
    with pytest.raises(InvalidInputError, match="decoding step"):
        scenario_of_batch({"input_ids": ids[:, :1]}, attn_implementation=None, **flow)
    with pytest.raises(InvalidInputError, match="must hold integers"):
        scenario_of_batch(
            {"input_ids": ids, "position_ids": np.zeros((1, 4)) + 0.5},
            attn_implementation=None,
            **flow,
        )
