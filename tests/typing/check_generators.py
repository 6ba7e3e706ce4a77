"""Checked-only typing tests for OpenAICompatibleGenerator (mypy and pyright, never run)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import assert_type

from probewise import (
    ArmTally,
    BatchGenerate,
    Completion,
    InferenceServerError,
    OpenAICompatibleGenerator,
    PairedResult,
    ProbewiseError,
    ServerTimeoutError,
    run_arm,
    run_paired,
)


def generators() -> None:
    prompts = {"p1": "a prompt", 2: "another"}
    a = OpenAICompatibleGenerator("http://localhost:8000/v1", "base", max_tokens=64)
    b = OpenAICompatibleGenerator(
        "http://localhost:8000/v1",
        "tuned",
        api_key="key",
        max_tokens=64,
        chat=False,
        extra_body={"seed": 0},
        rng=random.Random(0),
    )
    assert_type(run_arm(prompts, a), ArmTally)
    assert_type(run_paired(prompts, a, b, checkpoint="run.json"), PairedResult)
    batch: BatchGenerate[str] = a
    assert_type(batch.generate_batch(["x"]), Sequence[Completion | BaseException])
    assert_type(a("x"), Completion)
    assert_type(a.batch_size, int)
    error: ProbewiseError = ServerTimeoutError("t", url="u", attempts=1)
    timeout: TimeoutError = ServerTimeoutError("t", url="u", attempts=1)
    assert_type(InferenceServerError("x", url="u", attempts=2, status=500).status, int | None)
    del error, timeout


def negatives() -> None:
    OpenAICompatibleGenerator("http://h/v1", "m")  # type: ignore[call-arg]  # max_tokens is required
    OpenAICompatibleGenerator("http://h/v1", "m", max_tokens="64")  # type: ignore[arg-type]
