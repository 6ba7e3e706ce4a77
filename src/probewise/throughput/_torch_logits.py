"""Seeded random logits and labels, shared by the CE memory tracker and the loss timer.

Imports torch: imported only when a measurement runs (``data._ce_tracker``) or a loss
is timed (``timing.harness.time_loss``), so that ``import probewise`` does not.
"""

from __future__ import annotations

import torch

from probewise.throughput.data.ce_chunks import LogitsDtype

__all__ = ["TORCH_DTYPES", "random_logits"]

TORCH_DTYPES: dict[LogitsDtype, torch.dtype] = {
    LogitsDtype.FLOAT32: torch.float32,
    LogitsDtype.BFLOAT16: torch.bfloat16,
    LogitsDtype.FLOAT16: torch.float16,
}


def random_logits(
    shape: tuple[int, int, int],
    dtype: LogitsDtype,
    *,
    seed: int,
    device: str = "cpu",
    requires_grad: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded random ``(batch, tokens, vocab)`` logits (a leaf) and int64 labels for them."""
    batch, tokens, vocab_size = shape
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, vocab_size, (batch, tokens), generator=generator).to(device)
    logits = (
        torch.randn(shape, generator=generator)
        .to(device=device, dtype=TORCH_DTYPES[dtype])
        .requires_grad_(requires_grad)
    )
    return logits, labels
