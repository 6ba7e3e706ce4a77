"""measure_bytes_per_logit: the live-storage tracker against losses of known memory."""

from __future__ import annotations

import gc
import json

import pytest
import torch
import torch.nn.functional as F
from transformers.loss.loss_utils import ForCausalLMLoss

from probewise.errors import InvalidInputError
from probewise.throughput.data.ce_memory import LogitMemory, measure_bytes_per_logit
from probewise.throughput.data.lengths import LogitsDtype

V = 512
T = 256
ELEMENTS = V * T
LABEL_BYTES = 8 * T  # the int64 labels are resident too: 8 / V bytes per element
SCALARS = 64  # slack for 0-d tensors (the loss, nll's total weight, the seed gradient)


def about(bytes_per_element: int) -> range:
    """Peak bytes for ``bytes_per_element`` per logit, plus the labels and a few scalars."""
    low = bytes_per_element * ELEMENTS + LABEL_BYTES
    return range(low, low + SCALARS + 1)


def plain_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().view(-1, V), labels.view(-1))


def hf_causal_lm(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return ForCausalLMLoss(logits, labels, vocab_size=V)


def measure(loss_fn: object = plain_ce, **kwargs: object) -> LogitMemory:
    options: dict[str, object] = {"vocab_size": V, "tokens": T, "logits_dtype": "fp32"}
    options.update(kwargs)
    return measure_bytes_per_logit(loss_fn, **options)  # type: ignore[arg-type]


def test_plain_fp32_cross_entropy_from_first_principles() -> None:
    # fp32 logits: ``.float()`` and ``.view`` return the same storage, so nothing new.
    # Forward: logits 4 B + log_softmax output 4 B (saved for backward); nll_loss's
    # output is a scalar. Backward: nll_loss_backward makes a dense (N, V) gradient,
    # 4 B, and _log_softmax_backward_data reads it and the saved output and writes
    # the logits' gradient, 4 B. All alive at once: 4 + 4 + 4 + 4 = 16 B per element
    # (the gradient then becomes logits.grad without a copy). Counting nothing would
    # give 4, missing the backward 8, counting the views again >= 20.
    result = measure()
    assert result.peak_bytes in about(16)
    assert 15.5 < result.bytes_per_logit < 16.5
    assert result.logits_bytes == 4 * ELEMENTS
    assert result.tokens == T
    assert result.vocab_size == V


def test_hf_causal_lm_loss_bf16() -> None:
    # bf16 logits 2 B, upcast 4 B, log_softmax 4 B in the forward (10); the upcast is
    # freed when the loss returns, so the backward peaks at 2 + 4 + 4 + 4 = 14.
    # Had frees gone unseen it would be 2 + 4 + 4 + 4 + 4 + 2 = 20.
    result = measure(hf_causal_lm, logits_dtype=LogitsDtype.BFLOAT16)
    assert 10.0 <= result.bytes_per_logit <= 15.0
    assert result.logits_dtype is LogitsDtype.BFLOAT16
    assert result.logits_bytes == 2 * ELEMENTS


def test_default_call_measures_hf_loss_at_its_defaults() -> None:
    result = measure_bytes_per_logit(
        lambda logits, labels: ForCausalLMLoss(logits, labels, vocab_size=2048)
    )
    assert (result.vocab_size, result.tokens, result.backward) == (2048, 512, True)
    assert result.logits_dtype is LogitsDtype.BFLOAT16
    assert 10.0 <= result.bytes_per_logit <= 15.0


def test_forward_only_is_smaller() -> None:
    for loss_fn, dtype in ((plain_ce, "fp32"), (hf_causal_lm, "bf16")):
        forward = measure(loss_fn, logits_dtype=dtype, backward=False)
        both = measure(loss_fn, logits_dtype=dtype, backward=True)
        assert not forward.backward
        assert forward.peak_bytes < both.peak_bytes
    # fp32 forward: logits 4 + log_softmax 4.
    assert measure(backward=False).peak_bytes in about(8)


def test_a_tensor_alive_at_the_peak_adds_its_bytes() -> None:
    extra = 3 * 2**20
    kept: list[torch.Tensor] = []

    def with_extra(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        kept.append(torch.zeros(extra, dtype=torch.uint8))  # alive to the end
        return plain_ce(logits, labels)

    assert measure(with_extra).peak_bytes == measure().peak_bytes + extra


def test_an_upcast_kept_alive_adds_its_bytes() -> None:
    # bf16 logits: an fp32 copy (4 B) kept alive through the backward adds 4 B per element.
    kept: list[torch.Tensor] = []

    def keeps_upcast(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        kept.append(logits.detach().float() * 2)
        return hf_causal_lm(logits, labels)

    base = measure(hf_causal_lm, logits_dtype="bf16")
    more = measure(keeps_upcast, logits_dtype="bf16")
    # ``.float()`` makes one fp32 tensor and ``* 2`` another; the first is freed.
    assert more.peak_bytes == base.peak_bytes + 4 * ELEMENTS


def test_a_temporary_freed_before_the_peak_adds_nothing() -> None:
    def with_temporaries(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        for _ in range(10):
            tmp = torch.zeros(ELEMENTS, dtype=torch.float32)  # 4 B per element, freed
            del tmp
        return plain_ce(logits, labels)

    # The forward holds 8 B per element, +4 for a temporary: still under the 16 of
    # the backward. Ten of them unseen-freed would reach 8 + 40.
    assert measure(with_temporaries).peak_bytes == measure().peak_bytes


def test_views_count_once() -> None:
    def many_views(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        views = [logits.view(-1, V) for _ in range(20)]
        views += [logits[:, : T // 2], logits.transpose(1, 2), logits.float()]
        return F.cross_entropy(views[0], labels.view(-1))

    def one_view(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.view(-1, V), labels.view(-1))

    assert measure(many_views).peak_bytes == measure(one_view).peak_bytes


def test_batch_times_tokens() -> None:
    def batched(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.view(-1, V), labels.view(-1))

    result = measure(batched, batch=2, tokens=T // 2)
    assert result.tokens == T
    assert result.peak_bytes == measure(batched).peak_bytes


def test_deterministic() -> None:
    first = measure(hf_causal_lm, logits_dtype="bf16", seed=3)
    second = measure(hf_causal_lm, logits_dtype="bf16", seed=3)
    assert first == second


def test_dtype_names_parse() -> None:
    assert measure(logits_dtype="bf16") == measure(logits_dtype=LogitsDtype.BFLOAT16)
    assert measure(logits_dtype="float16").logits_dtype is LogitsDtype.FLOAT16


def test_to_dict_is_json_ready() -> None:
    result = measure(hf_causal_lm, logits_dtype="bf16")
    data = result.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["logits_dtype"] == "bfloat16"
    assert data["bytes_per_logit"] == result.bytes_per_logit


@pytest.mark.parametrize(
    "returned",
    [
        lambda logits: F.cross_entropy(
            logits.view(-1, V), torch.zeros(T, dtype=torch.long), reduction="none"
        ),
        lambda logits: 1.0,
        lambda logits: (logits.sum(),),
    ],
    ids=["per-token", "float", "tuple"],
)
def test_non_scalar_return_is_rejected(returned: object) -> None:
    def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> object:
        return returned(logits)  # type: ignore[operator]

    with pytest.raises(InvalidInputError, match="scalar tensor"):
        measure(loss_fn)


def test_loss_without_grad_is_rejected_for_backward() -> None:
    def detached(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return plain_ce(logits.detach(), labels)

    with pytest.raises(InvalidInputError, match="require grad"):
        measure(detached)
    assert not measure(detached, backward=False).backward


@pytest.mark.parametrize(
    "kwargs",
    [
        {"vocab_size": 1},
        {"vocab_size": 0},
        {"tokens": 0},
        {"batch": 0},
        {"seed": -1},
        {"tokens": 1.5},
        {"batch": True},
        {"logits_dtype": "int8"},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        measure(**kwargs)


def test_errors_from_the_loss_propagate_unchanged() -> None:
    class Boom(RuntimeError):
        pass

    def broken(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise Boom("from the caller")

    assert gc.isenabled()
    with pytest.raises(Boom, match="from the caller"):
        measure(broken)
    assert gc.isenabled()
    assert measure().peak_bytes in about(16)  # no tracker left behind


@pytest.mark.parametrize(
    "field",
    [{"peak_bytes": 0}, {"tokens": 0}, {"bytes_per_logit": float("nan")}, {"logits_bytes": 1}],
)
def test_logit_memory_validates(field: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "vocab_size": V,
        "tokens": T,
        "logits_dtype": LogitsDtype.FLOAT32,
        "backward": True,
        "peak_bytes": 16 * ELEMENTS,
        "logits_bytes": 4 * ELEMENTS,
        "bytes_per_logit": 16.0,
    }
    LogitMemory(**fields)  # type: ignore[arg-type]
    fields.update(field)
    with pytest.raises(InvalidInputError):
        LogitMemory(**fields)  # type: ignore[arg-type]


def test_the_plan_default_is_what_these_losses_measure() -> None:
    from probewise.throughput.data.lengths import ce_chunk_plan

    hf = measure(hf_causal_lm, logits_dtype=LogitsDtype.BFLOAT16)
    assert hf.peak_bytes in about(14)
    plain = measure()
    for memory, dtype in ((hf, LogitsDtype.BFLOAT16), (plain, LogitsDtype.FLOAT32)):
        plan = ce_chunk_plan(T, V, budget_bytes=1 << 30, logits_dtype=dtype)
        assert not plan.bytes_per_logit_measured
        assert plan.bytes_per_logit == pytest.approx(memory.bytes_per_logit, abs=0.1)
        measured = ce_chunk_plan(
            T, V, budget_bytes=1 << 30, logits_dtype=dtype, bytes_per_logit=memory.bytes_per_logit
        )
        assert measured.bytes_per_logit_measured


def test_the_first_call_in_a_fresh_process_reads_the_steady_state() -> None:
    # The first dispatch-mode call in a process once read 18 B/elem for HF's loss
    # (one-time imports kept the fp32 upcast alive); the warm-up run removes that.
    import subprocess
    import sys

    code = (
        "from transformers.loss.loss_utils import ForCausalLMLoss\n"
        "from probewise.throughput.data.ce_memory import measure_bytes_per_logit\n"
        "f = lambda lg, lb: ForCausalLMLoss(lg, lb, vocab_size=512)\n"
        "a = measure_bytes_per_logit(f, vocab_size=512, tokens=256).peak_bytes\n"
        "b = measure_bytes_per_logit(f, vocab_size=512, tokens=256).peak_bytes\n"
        "print(a, b)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    first, second = (int(x) for x in out.stdout.split())
    assert first == second
    assert first in about(14)
