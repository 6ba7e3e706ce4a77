"""Checked-only typing tests: a torch dtype is accepted wherever a dtype is asked.

Never run by pytest. Each ``# type: ignore[code]`` marks a negative case: when it
stops being an error, warn_unused_ignores / reportUnnecessaryTypeIgnoreComment fail.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from probewise import MaskReport, MaskScenario, ce_chunk_plan, probe_masks
from probewise.throughput import (
    AttentionDtype,
    LogitMemory,
    LogitsDtype,
    TorchDtype,
    measure_bytes_per_logit,
)


def torch_dtypes_fit(loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    as_protocol: TorchDtype = torch.bfloat16
    LogitsDtype.parse(as_protocol)
    AttentionDtype.parse(torch.float16)
    ce_chunk_plan(4096, 32_000, budget_bytes=1 << 30, logits_dtype=torch.float32)
    memory: LogitMemory = measure_bytes_per_logit(loss, logits_dtype=torch.bfloat16)
    report: MaskReport = probe_masks("llama3-8b", MaskScenario(seq_len=64), dtype=torch.half)
    del memory, report


def other_dtypes_do_not() -> None:
    LogitsDtype.parse(np.dtype("float32"))  # type: ignore[arg-type]
    AttentionDtype.parse(3)  # type: ignore[arg-type]
