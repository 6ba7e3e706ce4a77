"""torch dtypes are accepted wherever probewise asks for a dtype, recognised without torch."""

from __future__ import annotations

import importlib.resources
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from probewise import MaskScenario, ce_chunk_plan, probe_masks
from probewise.errors import InvalidInputError
from probewise.throughput import (
    AttentionDtype,
    LogitsDtype,
    MaskKind,
    SdpaCall,
    bundled_configs,
    measure_bytes_per_logit,
)

# Private: the dtype namer is shared by two probes, and tested once here for both.
from probewise.throughput._torch_dtype import torch_dtype_name

LOGITS = {
    torch.float32: LogitsDtype.FLOAT32,
    torch.bfloat16: LogitsDtype.BFLOAT16,
    torch.float16: LogitsDtype.FLOAT16,
}
ATTENTION = {
    torch.float32: AttentionDtype.FLOAT32,
    torch.bfloat16: AttentionDtype.BFLOAT16,
    torch.float16: AttentionDtype.FLOAT16,
    torch.float64: AttentionDtype.FLOAT64,
}
NOT_FLOATING = (torch.int64, torch.int8, torch.bool, torch.complex64, torch.uint8)


def test_every_torch_dtype_is_named_as_torch_prints_it() -> None:
    named = [v for v in vars(torch).values() if isinstance(v, torch.dtype)]
    assert len(named) > 10
    for dtype in named:
        assert torch_dtype_name(dtype) == str(dtype).removeprefix("torch.")


@pytest.mark.parametrize(("dtype", "expected"), LOGITS.items())
def test_logits_dtype_parses_torch_dtypes(dtype: torch.dtype, expected: LogitsDtype) -> None:
    assert LogitsDtype.parse(dtype) is expected
    assert LogitsDtype.parse(dtype) is LogitsDtype.parse(str(dtype))


@pytest.mark.parametrize(("dtype", "expected"), ATTENTION.items())
def test_attention_dtype_parses_torch_dtypes(dtype: torch.dtype, expected: AttentionDtype) -> None:
    assert AttentionDtype.parse(dtype) is expected
    call = SdpaCall(
        batch=1,
        query_heads=2,
        kv_heads=2,
        query_length=8,
        kv_length=8,
        head_dim=16,
        value_head_dim=16,
        dtype=dtype,
        mask=MaskKind.NONE,
        mask_shape=None,
        is_causal=True,
        dropout=0.0,
        enable_gqa=False,
    )
    assert call.dtype is expected


@pytest.mark.parametrize("dtype", NOT_FLOATING)
def test_torch_dtypes_without_a_meaning_here_are_refused(dtype: torch.dtype) -> None:
    with pytest.raises(InvalidInputError, match=str(dtype).removeprefix("torch.")):
        LogitsDtype.parse(dtype)
    with pytest.raises(InvalidInputError, match=str(dtype).removeprefix("torch.")):
        AttentionDtype.parse(dtype)
    # float64 logits are not a dtype the chunk plan models
    with pytest.raises(InvalidInputError, match="float64"):
        LogitsDtype.parse(torch.float64)


class _Lookalike:
    """Has a torch dtype's attributes and ``str``, but is not one."""

    is_floating_point = True
    itemsize = 4

    def __str__(self) -> str:
        return "torch.float32"


@given(
    st.one_of(
        st.integers(),
        st.floats(allow_nan=False),
        st.binary(),
        st.sampled_from([np.dtype("float32"), np.float32, float, _Lookalike(), None, object()]),
    )
)
def test_anything_else_is_not_a_torch_dtype(value: object) -> None:
    assert torch_dtype_name(value) is None
    with pytest.raises(InvalidInputError):
        LogitsDtype.parse(value)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        AttentionDtype.parse(value)  # type: ignore[arg-type]


def test_ce_chunk_plan_takes_a_torch_dtype() -> None:
    budget = 3 << 30
    for dtype, named in LOGITS.items():
        plan = ce_chunk_plan(32_768, 128_256, budget_bytes=budget, logits_dtype=dtype)
        assert plan == ce_chunk_plan(32_768, 128_256, budget_bytes=budget, logits_dtype=named)
        assert plan.logits_dtype is named


def test_measure_bytes_per_logit_takes_a_torch_dtype() -> None:
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().view(-1, 64), labels.view(-1))

    by_torch = measure_bytes_per_logit(loss, vocab_size=64, tokens=16, logits_dtype=torch.float16)
    by_name = measure_bytes_per_logit(loss, vocab_size=64, tokens=16, logits_dtype="fp16")
    assert by_torch.logits_dtype is LogitsDtype.FLOAT16
    assert by_torch == by_name


def test_probe_masks_takes_a_torch_dtype() -> None:
    assert "llama3-8b" in bundled_configs()
    config = json.loads(
        (
            importlib.resources.files("probewise.throughput.attention")
            / "configs"
            / "llama3-8b.json"
        ).read_text()
    )
    config["num_hidden_layers"] = 1
    scenario = MaskScenario(seq_len=16)
    report = probe_masks(config, scenario, dtype=torch.float16)
    assert report.dtype is AttentionDtype.FLOAT16
    assert report.layers == probe_masks(config, scenario, dtype="fp16").layers
