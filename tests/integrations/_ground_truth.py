"""The ground truth the in-loop checks are held to: perturb the first document of a
packed row and see whether the later documents' logits move, in the real forward.

The model runs as the loop runs it (its training mode, checkpointing and config as
they are, gradients on: transformers' checkpointing rules read ``is_grad_enabled``),
on the batch the loop passes, with the keyword arguments the loop passes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

VOCAB = 64


def tiny_llama(*, use_cache: bool = True, seed: int = 0) -> torch.nn.Module:
    """A randomly initialised two-layer Llama of width 32 (no download)."""
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        vocab_size=VOCAB,
        num_hidden_layers=2,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=use_cache,
    )
    torch.manual_seed(seed)
    model: torch.nn.Module = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="sdpa"
    )
    return model


def first_document(positions: torch.Tensor) -> int:
    """Tokens of the first document of row 0: up to the first position that is 0 again."""
    row = positions.reshape(-1, positions.shape[-1])[0].tolist()
    return next((i for i in range(1, len(row)) if row[i] == 0), len(row))


def leaks(model: torch.nn.Module, batch: Mapping[str, object], **forward_kwargs: object) -> bool:
    """Whether the later documents' logits change when the first document's tokens do."""
    ids = batch["input_ids"]
    positions = batch["position_ids"]
    assert isinstance(ids, torch.Tensor)
    assert isinstance(positions, torch.Tensor)
    first = first_document(positions)
    assert 0 < first < ids.shape[-1], "the batch must pack at least two documents"
    perturbed = ids.clone()
    perturbed[..., :first] = (ids[..., :first] + 7) % VOCAB
    rest = {k: v for k, v in batch.items() if k not in ("input_ids", "labels")}
    with torch.enable_grad():
        before = model(input_ids=ids, **rest, **forward_kwargs).logits[..., first:, :].detach()
        after = model(input_ids=perturbed, **rest, **forward_kwargs).logits[..., first:, :].detach()
    return not torch.allclose(before, after, rtol=0.0, atol=1e-6)
