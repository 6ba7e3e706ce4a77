"""The timing harness calls exactly what it is given, and keeps the evidence.

No timed assertion here (machines are noisy): the tests check call counts, call
order, the summaries' arithmetic, the refusal before running, and the saved files.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

from probewise.errors import InsufficientPointsError, InvalidInputError
from probewise.throughput.timing.harness import (
    Clock,
    StepTiming,
    measure_scaling,
    padding_penalty,
    time_loss,
    time_step,
)
from probewise.throughput.timing.scaling import ScalingFit


class Counted:
    """A step that records every call."""

    def __init__(self, log: list[str] | None = None, name: str = "step") -> None:
        self.calls = 0
        self.log = log
        self.name = name

    def __call__(self) -> None:
        self.calls += 1
        if self.log is not None:
            self.log.append(self.name)


def test_time_step_calls_warmup_then_repeats(tmp_path: Path) -> None:
    step = Counted()
    timing = time_step(step, warmup=2, repeats=4, label="x", save_to=tmp_path)
    assert step.calls == 6
    assert timing.repeats == 4
    assert timing.warmup == 2
    assert timing.clock is Clock.MONOTONIC  # no CUDA on this machine kind
    assert timing.median == statistics.median(timing.samples)
    assert timing.min <= timing.median <= timing.max
    saved = json.loads((tmp_path / "timing.json").read_text())
    assert saved == json.loads(json.dumps(timing.to_dict()))
    assert saved["samples"] == list(timing.samples)


def test_time_step_summary_arithmetic() -> None:
    timing = StepTiming(samples=(1.0, 2.0, 10.0, 3.0), warmup=0, clock=Clock.MONOTONIC)
    assert timing.median == 2.5
    assert timing.mad == 1.0  # |1-2.5|, |2-2.5|, |10-2.5|, |3-2.5| -> median(1.5, .5, 7.5, .5)
    with pytest.raises(InvalidInputError):
        StepTiming(samples=(), warmup=0, clock=Clock.MONOTONIC)
    with pytest.raises(InvalidInputError):
        StepTiming(samples=(float("nan"),), warmup=0, clock=Clock.MONOTONIC)


def test_time_step_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidInputError, match="repeats"):
        time_step(Counted(), repeats=0)
    with pytest.raises(InvalidInputError, match="warmup"):
        time_step(Counted(), warmup=-1)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInputError, match="needs CUDA"):
            time_step(Counted(), sync=True)


def test_errors_from_the_step_propagate() -> None:
    class Boom(RuntimeError):
        pass

    def step() -> None:
        raise Boom("canary-step-error")

    with pytest.raises(Boom, match="canary-step-error"):
        time_step(step)


def test_measure_scaling_refuses_before_running() -> None:
    made: list[int] = []

    def factory(length: int) -> Callable[[], object]:
        made.append(length)
        return Counted()

    for lengths in ([], [512], [512, 1024], [512, 512, 1024, 1024]):
        with pytest.raises(InsufficientPointsError, match="nothing was run"):
            measure_scaling(factory, lengths)
    assert made == []


_TINY = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 256,
    "attn_implementation": "sdpa",
}


def _tiny_llama() -> torch.nn.Module:
    return LlamaForCausalLM(LlamaConfig(**_TINY))


def _tiny_gemma3() -> torch.nn.Module:
    # Gemma3's sliding-window layers too (window 16 < the longest length timed).
    return Gemma3ForCausalLM(Gemma3TextConfig(**_TINY, head_dim=16, sliding_window=16))


@pytest.mark.parametrize("build", [_tiny_llama, _tiny_gemma3], ids=["llama", "gemma3"])
def test_measure_scaling_runs_the_real_step_it_was_given(
    build: Callable[[], torch.nn.Module], tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    forwards: list[int] = []
    model.register_forward_hook(lambda _m, args, _out: forwards.append(1))
    steps: dict[int, Counted] = {}

    class TrainStep(Counted):
        def __init__(self, length: int) -> None:
            super().__init__()
            self.ids = torch.randint(0, 128, (2, length))

        def __call__(self) -> None:
            super().__call__()
            out = model(input_ids=self.ids, labels=self.ids)  # the model's own loss
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    def factory(length: int) -> Callable[[], object]:
        steps[length] = TrainStep(length)
        return steps[length]

    before = [p.detach().clone() for p in model.parameters()]
    lengths = [16, 32, 64, 128]
    result = measure_scaling(factory, lengths, batch=2, warmup=1, repeats=2, save_to=tmp_path)
    # Exactly the callables it was given, each warmup + repeats times, nothing else.
    assert sorted(steps) == lengths
    assert all(step.calls == 3 for step in steps.values())
    assert len(forwards) == 3 * len(lengths)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert [t.label for t in result.timings] == [str(x) for x in lengths]
    assert len(result.points) == 2 * len(lengths)
    assert all(p.batch == 2 for p in result.points)
    assert isinstance(result.fit, ScalingFit)
    assert result.fit.n_lengths == 4
    assert result.fit.dof == 1
    saved = json.loads((tmp_path / "scaling.json").read_text())
    assert saved["fit"] == json.loads(json.dumps(result.fit.to_dict()))
    csv_rows = (tmp_path / "points.csv").read_text().splitlines()
    assert csv_rows[0] == "length,seconds,batch"
    assert len(csv_rows) == 1 + len(result.points)
    # The saved points re-derive the same fit.
    from probewise.cli.fit import read_points

    assert (
        ScalingFit.fit(read_points([str(tmp_path / "points.csv")], 1)).to_dict()
        == result.fit.to_dict()
    )


def test_padding_penalty_interleaves_and_divides(tmp_path: Path) -> None:
    log: list[str] = []
    penalty = padding_penalty(
        Counted(log, "padded"), Counted(log, "unpadded"), warmup=1, repeats=3, save_to=tmp_path
    )
    assert log == ["padded", "unpadded"] * 4
    assert penalty.ratio == penalty.padded.median / penalty.unpadded.median
    assert penalty.ratio_low <= penalty.ratio <= penalty.ratio_high
    saved = json.loads((tmp_path / "padding_penalty.json").read_text())
    assert saved["padded"]["samples"] == list(penalty.padded.samples)


def test_time_loss_runs_the_callers_loss() -> None:
    calls: list[tuple[torch.Size, torch.dtype]] = []

    def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        calls.append((logits.shape, logits.dtype))
        return torch.nn.functional.cross_entropy(logits.float().view(-1, 64), labels.view(-1))

    timing = time_loss(loss_fn, vocab_size=64, tokens=32, batch=2, warmup=1, repeats=3)
    assert calls == [(torch.Size([2, 32, 64]), torch.bfloat16)] * 4
    assert timing.repeats == 3
    assert "2x32x64 bfloat16" in timing.label
    with pytest.raises(InvalidInputError, match="scalar"):
        time_loss(lambda lg, lb: lg.sum(dim=-1), vocab_size=8, tokens=4, repeats=1)
    with pytest.raises(InvalidInputError, match="vocab_size"):
        time_loss(loss_fn, vocab_size=0, tokens=4)


def test_capture_kernels_on_cpu_keeps_the_evidence(tmp_path: Path) -> None:
    from probewise.throughput.kernels import KernelTable
    from probewise.throughput.timing.harness import capture_kernels

    torch.manual_seed(0)
    model = _tiny_llama()
    ids = torch.randint(0, 128, (2, 32))
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        model(input_ids=ids, labels=ids).loss.backward()

    capture = capture_kernels(step, steps=2, warmup=1, save_to=tmp_path)
    assert len(calls) == 3
    # No device on CPU: an empty kernel table, not an error.
    assert capture.kernels.kernel_us == 0.0
    assert capture.kernels.rows == ()
    names = {row.name for row in capture.cpu_ops}
    assert "aten::mm" in names or "aten::addmm" in names
    assert all(row.calls >= 1 for row in capture.cpu_ops)
    selfs = [row.self_cpu_us for row in capture.cpu_ops]
    assert selfs == sorted(selfs, reverse=True)
    # The saved trace reads back to the same kernel rows and totals.
    again = KernelTable.from_chrome_trace(tmp_path / "trace.json")
    assert again.rows == capture.kernels.rows
    assert again.kernel_us == capture.kernels.kernel_us
    printed = (tmp_path / "key_averages.txt").read_text()
    assert "Self CPU" in printed
    assert KernelTable.from_profiler_table(printed).kernel_us == 0.0
    saved = json.loads((tmp_path / "capture.json").read_text())
    assert saved["steps"] == 2
    assert len(saved["cpu_ops"]) == len(capture.cpu_ops)
