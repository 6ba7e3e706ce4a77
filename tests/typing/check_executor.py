"""Checked-only typing tests for the executor paths (mypy and pyright, never run).

Each ``# type: ignore[code]`` marks a negative case: when it stops being an error,
warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

import functools
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import assert_type

from probewise import ArmTally, Completion, KernelTable, OpenAICompatibleGenerator
from probewise.responses import run_arm_shards
from probewise.throughput import ChromeTraceSet, read_chrome_traces


def echo(prompt: str) -> Completion:
    return Completion(text=prompt)


def make_number() -> int:
    return 4


def traces(path: str) -> None:
    with ThreadPoolExecutor(2) as pool:
        assert_type(KernelTable.from_chrome_trace(path, executor=pool, workers=1), KernelTable)
        assert_type(read_chrome_traces([path, path], executor=pool), ChromeTraceSet)
    with ProcessPoolExecutor(2) as processes:
        assert_type(
            KernelTable.from_chrome_trace(path, executor=processes, allow_mixed_jobs=True),
            KernelTable,
        )
    KernelTable.from_chrome_trace(path, executor=4)  # type: ignore[arg-type]
    read_chrome_traces(path, executor="tcp://scheduler:8786")  # type: ignore[arg-type]


def shards() -> None:
    parts = [{"a": "one prompt"}, {"b": "another"}]
    assert_type(run_arm_shards(parts, lambda: echo), ArmTally)
    server = functools.partial(
        OpenAICompatibleGenerator, "http://localhost:8000/v1", "base", max_tokens=64
    )
    with ThreadPoolExecutor(2) as pool:
        assert_type(run_arm_shards(parts, server, executor=pool), ArmTally)
    run_arm_shards(parts, echo)  # type: ignore[arg-type]  # the generator, not a factory
    run_arm_shards(parts, make_number)  # type: ignore[arg-type]  # makes no generator
