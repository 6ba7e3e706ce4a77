"""A real training batch read as a :class:`~probewise.throughput.attention.masks.MaskScenario`
(no torch here: tensors are read through ``numpy.asarray``).

What decides the masks of a forward is the shape of the batch and how its documents
are marked, never the token values, so only ``input_ids`` (or ``inputs_embeds``),
``position_ids``, ``attention_mask`` and the ``cu_seq_lens_*`` keys that flattening
collators add are read.

- **Packing** is read from ``position_ids`` as transformers reads it
  (``find_packed_sequence_indices``): a new document starts wherever a position is
  not the one before it plus one. A row with two or more documents makes the batch
  packed: :attr:`Packing.POSITION_IDS` without an attention mask,
  :attr:`Packing.ALL_ONES_MASK` with one (transformers looks for packing only when
  the mask is ``None``).
- **Padding** is read from a 2-D ``attention_mask``: zeros after the ones of every
  row is right padding, before them left padding.
- ``cu_seq_lens_q`` / ``cu_seq_lens_k`` must agree with the documents that
  ``position_ids`` mark (both come from the same collator); without ``position_ids``
  they are refused, since only the FlashAttention kernels read them.

Two approximations, both named in :func:`~probewise.integrations.torch.check_forward`'s
documentation: rows that pack documents differently are probed with the layout of the
row holding the most documents, at the batch's full shape (whether documents leak, and
which layers keep the fast path, depends on how they are marked, not on their lengths);
and rows that are both packed and padded are probed as packed with an all-ones
attention mask, the padding's positions split into documents as transformers would
split them (transformers does not look for packing when a mask is passed, so the
verdict is the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import numpy.typing as npt

from probewise.errors import InvalidInputError, UnsupportedModelError
from probewise.throughput.attention.masks import MaskScenario, Packing, Padding

__all__ = ["as_array", "documents_of", "scenario_of_batch"]

_Ints = npt.NDArray[np.int64]


def as_array(value: object, name: str) -> _Ints:
    """A tensor, array or nested list of integers (or bools) as an int64 array."""
    detach = getattr(value, "detach", None)
    if callable(detach):  # a torch tensor, possibly on a GPU: copied to the host
        detached: object = detach()
        cpu = getattr(detached, "cpu", None)
        if callable(cpu):
            value = cpu()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"batch[{name!r}] is not an array: {error}") from None
    if array.dtype.kind not in "biu":
        raise InvalidInputError(
            f"batch[{name!r}] must hold integers, got dtype {array.dtype} of shape {array.shape}"
        )
    return array.astype(np.int64)


def _shape(batch: Mapping[str, object]) -> tuple[int, int]:
    """(rows, tokens per row) from ``input_ids`` or ``inputs_embeds``."""
    if batch.get("input_ids") is not None:
        ids = as_array(batch["input_ids"], "input_ids")
        if ids.ndim == 1:
            return 1, int(ids.shape[0])
        if ids.ndim != 2:
            raise InvalidInputError(f"batch['input_ids'] must be 2-D, got shape {ids.shape}")
        return int(ids.shape[0]), int(ids.shape[1])
    embeds = batch.get("inputs_embeds")
    shape = cast("object", getattr(embeds, "shape", None))
    if isinstance(shape, tuple) and len(cast("tuple[object, ...]", shape)) == 3:
        rows, tokens, _width = cast("tuple[int, int, int]", shape)
        return int(rows), int(tokens)
    raise InvalidInputError(
        "the batch has no input_ids (or a 3-D inputs_embeds): the forward's shape is unknown"
    )


def documents_of(positions: _Ints) -> list[tuple[int, ...]]:
    """The document lengths of each row, where a document starts wherever a position
    is not the previous one plus one (transformers' ``find_packed_sequence_indices``)."""
    found: list[tuple[int, ...]] = []
    for row in positions:
        starts = [0, *(int(i) + 1 for i in np.flatnonzero(np.diff(row) != 1))]
        ends = [*starts[1:], int(row.shape[0])]
        found.append(tuple(end - start for start, end in zip(starts, ends, strict=True)))
    return found


def _positions(batch: Mapping[str, object], rows: int, tokens: int) -> _Ints | None:
    if batch.get("position_ids") is None:
        return None
    positions = as_array(batch["position_ids"], "position_ids")
    if positions.ndim == 1:
        positions = positions[None, :]
    if positions.ndim != 2 or positions.shape[1] != tokens or positions.shape[0] not in (1, rows):
        raise UnsupportedModelError(
            f"batch['position_ids'] has shape {positions.shape}; check_forward reads 1-D or "
            f"2-D position ids of the batch's shape ({rows}, {tokens}) (multimodal rotary "
            "positions are not modelled)"
        )
    return np.broadcast_to(positions, (rows, tokens))


def _padding(batch: Mapping[str, object], rows: int, tokens: int) -> tuple[Padding, list[int]]:
    """The padding side and each row's real tokens, from a 2-D attention mask."""
    shape = cast("object", getattr(batch["attention_mask"], "shape", None))
    if isinstance(shape, tuple) and len(cast("tuple[object, ...]", shape)) != 2:
        raise UnsupportedModelError(
            f"batch['attention_mask'] has shape {shape}; check_forward reads a 2-D "
            "padding mask, not a custom 4-D mask"
        )
    mask = as_array(batch["attention_mask"], "attention_mask")
    if mask.ndim != 2 or mask.shape != (rows, tokens):
        raise UnsupportedModelError(
            f"batch['attention_mask'] has shape {mask.shape}; check_forward reads a 2-D "
            f"padding mask of the batch's shape ({rows}, {tokens}), not a custom 4-D mask"
        )
    lengths = [int(n) for n in (mask != 0).sum(axis=1)]
    if all(n == tokens for n in lengths):
        return Padding.NONE, lengths
    right = all(not mask[r, n:].any() for r, n in enumerate(lengths))
    left = all(not mask[r, : tokens - n].any() for r, n in enumerate(lengths))
    if right:
        return Padding.RIGHT, lengths
    if left:
        return Padding.LEFT, lengths
    raise UnsupportedModelError(
        "batch['attention_mask'] has holes (masked tokens between real ones): "
        "check_forward reads right or left padding only"
    )


def _check_cu_seq_lens(
    batch: Mapping[str, object], layouts: list[tuple[int, ...]] | None, tokens: int
) -> None:
    for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if batch.get(key) is None:
            continue
        if layouts is None:
            raise UnsupportedModelError(
                f"the batch has {key} but no position_ids: only FlashAttention reads "
                f"{key}, so under eager or SDPA its documents would attend to each other; "
                "pass position_ids too (DataCollatorWithFlattening does by default)"
            )
        bounds = as_array(batch[key], key).reshape(-1)
        flat = tuple(int(n) for n in np.diff(bounds))
        marked = tuple(n for layout in layouts for n in layout)
        if flat != marked or int(bounds[-1]) != tokens * len(layouts):
            raise InvalidInputError(
                f"batch[{key!r}] marks documents of lengths {list(flat)[:8]} but position_ids "
                f"mark {list(marked)[:8]}: they disagree"
            )


def scenario_of_batch(
    batch: Mapping[str, object],
    *,
    training: bool,
    use_cache: bool | None,
    gradient_checkpointing: bool,
    attn_implementation: str | None,
) -> MaskScenario:
    """The :class:`MaskScenario` a forward over ``batch`` runs (see the module's notes)."""
    rows, tokens = _shape(batch)
    if tokens < 2:
        raise InvalidInputError(
            f"the batch has {tokens} token per row: check_forward checks a training or "
            "prefill forward (at least 2 tokens), not a decoding step"
        )
    positions = _positions(batch, rows, tokens)
    layouts = None if positions is None else documents_of(positions)
    _check_cu_seq_lens(batch, layouts, tokens)
    has_mask = batch.get("attention_mask") is not None
    padding, lengths = (
        _padding(batch, rows, tokens) if has_mask else (Padding.NONE, [tokens] * rows)
    )
    most = max(layouts or [()], key=len)
    if len(most) > 1:
        return MaskScenario(
            seq_len=tokens,
            batch=rows,
            packing=Packing.ALL_ONES_MASK if has_mask else Packing.POSITION_IDS,
            documents=most,
            training=training,
            use_cache=use_cache,
            gradient_checkpointing=gradient_checkpointing,
            attn_implementation=attn_implementation,
        )
    return MaskScenario(
        seq_len=tokens,
        batch=rows,
        padding=padding,
        lengths=() if padding is Padding.NONE else tuple(lengths),
        training=training,
        use_cache=use_cache,
        gradient_checkpointing=gradient_checkpointing,
        attn_implementation=attn_implementation,
    )
