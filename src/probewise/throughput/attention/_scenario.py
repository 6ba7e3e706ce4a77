"""The batch the mask probe runs (:class:`MaskScenario`): its shape, padding and packing,
the forward that runs it, and the inputs it becomes (no torch here)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import assert_never, cast, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise import _json
from probewise._validation import positive, true_or_false
from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.throughput.attention._coerce import as_enum, as_int, as_ints, optional_bool

__all__ = [
    "IMPLEMENTATIONS",
    "AttentionKind",
    "MaskScenario",
    "Packing",
    "Padding",
    "attention_kind",
    "scenario_inputs",
]

IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "flash_attention_2", "flash_attention_3")
"""The attention implementations transformers names (``attn_implementation``), in the
order ``--attn-implementation all`` probes them; a hub kernel (``org/name``) is also
accepted."""


@enum.unique
class AttentionKind(enum.Enum):
    """Which family an ``attn_implementation`` belongs to (how the probe reads it)."""

    EAGER = "eager"
    """transformers' own matmul-softmax attention: the mask is always dense."""
    SDPA = "sdpa"
    """``torch.nn.functional.scaled_dot_product_attention``."""
    FLEX = "flex_attention"
    """``torch.nn.attention.flex_attention`` with a compiled ``BlockMask``."""
    FLASH = "flash"
    """FlashAttention 2/3/4, or a hub kernel exposing ``flash_attn_varlen_func``."""


def attention_kind(name: str) -> AttentionKind:
    """The family of an ``attn_implementation`` name (raises on a name transformers
    does not know, with the names it does)."""
    if name in ("eager", "sdpa", "flex_attention"):
        return AttentionKind(name)
    if name.startswith("flash_attention_") and name.removeprefix("flash_attention_").isdigit():
        return AttentionKind.FLASH
    repo = name.partition("@")[0].partition(":")[0]
    owner, slash, kernel = repo.partition("/")
    if slash and owner.strip() and kernel.strip() and "/" not in kernel:
        return AttentionKind.FLASH  # a hub kernel (kernels-community/flash-attn2, ...)
    raise InvalidInputError(
        f"attn_implementation must be one of {', '.join(IMPLEMENTATIONS)} or a hub kernel "
        f"(org/name), got {name!r}"
    )


@enum.unique
class Padding(enum.Enum):
    """Where a padded batch row keeps its padding (:attr:`MaskScenario.padding`)."""

    NONE = "none"
    """No padding: every row is ``seq_len`` real tokens (an all-ones attention mask)."""
    RIGHT = "right"
    """Real tokens first, padding after (the usual training collator)."""
    LEFT = "left"
    """Padding first, real tokens after (the usual generation batch)."""


@enum.unique
class Packing(enum.Enum):
    """How documents packed into one row are marked (:attr:`MaskScenario.packing`)."""

    NONE = "none"
    """One document per row."""
    POSITION_IDS = "position_ids"
    """Documents marked by ``position_ids`` that restart at 0, and no attention mask:
    transformers detects the packing and builds a block-diagonal mask."""
    ALL_ONES_MASK = "all_ones_mask"
    """Restarting ``position_ids`` plus an all-ones attention mask (what many collators
    send): transformers looks for packing only when the mask is ``None``."""


def _default_lengths(scenario: MaskScenario) -> tuple[int, ...]:
    if scenario.padding is Padding.NONE or scenario.batch < 1:  # the validators say why
        return ()
    step = scenario.seq_len // (2 * scenario.batch)
    return tuple(max(1, scenario.seq_len - (b + 1) * step) for b in range(scenario.batch))


def _default_documents(scenario: MaskScenario) -> tuple[int, ...]:
    if scenario.packing is Packing.NONE or scenario.seq_len < 2:  # the validators say why
        return ()
    parts = min(4, scenario.seq_len)
    size = scenario.seq_len // parts
    return (size,) * (parts - 1) + (scenario.seq_len - size * (parts - 1),)


# Named converters (mypy's attrs plugin reads only named functions); their parameter
# types are the static contract, the bodies check at run time all the same.
def _seq_len(value: int) -> int:
    return as_int(value, "seq_len")


def _batch(value: int) -> int:
    return as_int(value, "batch")


def _lengths(values: Iterable[int]) -> tuple[int, ...]:
    return as_ints(values, "lengths")


def _documents(values: Iterable[int]) -> tuple[int, ...]:
    return as_ints(values, "documents")


def _padding(value: Padding) -> Padding:
    return as_enum(value, Padding, "padding")


def _packing(value: Packing) -> Packing:
    return as_enum(value, Packing, "packing")


def _implementation(value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(cast("object", value), str):
        raise ArgumentTypeValueError(
            f"attn_implementation must be a str or None, got {type(value).__name__}"
        )
    attention_kind(value)
    return value


def _seq_len_ok(_instance: object, _attribute: object, value: int) -> None:
    if value < 2:
        raise InvalidInputError(
            f"seq_len must be >= 2 (a prefill or training forward), got {value}"
        )


def _lengths_ok(instance: MaskScenario, _attribute: object, value: tuple[int, ...]) -> None:
    if instance.padding is Padding.NONE:
        if value:
            raise InvalidInputError("lengths are given only with padding right or left")
        return
    if len(value) != instance.batch:
        raise InvalidInputError(
            f"lengths needs one length per batch row ({instance.batch}), got {len(value)}"
        )
    for length in value:
        if not 1 <= length <= instance.seq_len:
            raise InvalidInputError(
                f"every length must be in [1, seq_len={instance.seq_len}], got {length}"
            )


def _documents_ok(instance: MaskScenario, _attribute: object, value: tuple[int, ...]) -> None:
    if instance.packing is Packing.NONE:
        if value:
            raise InvalidInputError("documents are given only with packing")
        return
    if instance.padding is not Padding.NONE:
        raise InvalidInputError("a scenario is padded or packed, not both")
    if any(length < 1 for length in value) or sum(value) != instance.seq_len:
        raise InvalidInputError(
            f"documents must be lengths >= 1 that sum to seq_len={instance.seq_len}, got {value}"
        )


@_json.shaped(_json.Shape(after={"lengths": "padding"}))
@final
@attrs.frozen(kw_only=True)
class MaskScenario:
    """The batch the probe runs: its shape, padding and packing."""

    seq_len: int = attrs.field(converter=_seq_len, validator=_seq_len_ok)
    """Tokens per row (the padded or packed length), at least 2: a one-token query is
    a decode step, which transformers routes differently (``pack_gqa``)."""
    batch: int = attrs.field(default=1, converter=_batch, validator=positive)
    """Rows in the batch."""
    padding: Padding = attrs.field(default=Padding.NONE, converter=_padding)
    """Where the padding goes, if any."""
    packing: Packing = attrs.field(default=Packing.NONE, converter=_packing)
    """How packed documents are marked, if any."""
    lengths: tuple[int, ...] = attrs.field(
        default=attrs.Factory(_default_lengths, takes_self=True),
        converter=_lengths,
        validator=_lengths_ok,
    )
    """With padding: the real tokens of each row. Default: row ``b`` keeps
    ``seq_len - (b + 1) * (seq_len // (2 * batch))``, so every row is padded."""
    documents: tuple[int, ...] = attrs.field(
        default=attrs.Factory(_default_documents, takes_self=True),
        converter=_documents,
        validator=_documents_ok,
    )
    """With packing: the document lengths of every row, in order (they sum to
    ``seq_len``). Default: four equal documents."""
    training: bool = attrs.field(default=True, validator=true_or_false)
    """A training forward: ``model.train()`` with gradients on (dropout as configured;
    backward rules for the predictor). ``False``: ``model.eval()`` under ``no_grad``."""
    use_cache: bool | None = attrs.field(default=None, validator=optional_bool)
    """The ``use_cache`` passed to the forward. ``None`` passes nothing, so the
    config's own ``use_cache`` applies, as in a plain ``model(**batch)`` (true by
    default for Llama, Mistral, Qwen and Gemma). When it is in effect, transformers
    builds a ``DynamicCache`` and then skips packed-sequence detection, so packed
    documents attend to each other (see the attention-preflight how-to)."""
    gradient_checkpointing: bool = attrs.field(default=False, validator=true_or_false)
    """Activation (gradient) checkpointing enabled on the model. In a training forward
    transformers then turns ``use_cache`` off (``merge_with_config_defaults``), so no
    cache is built; in an inference forward it changes nothing."""
    attn_implementation: str | None = attrs.field(default=None, converter=_implementation)
    """The attention implementation the model runs: ``"eager"``, ``"sdpa"``,
    ``"flex_attention"``, ``"flash_attention_2"``, ``"flash_attention_3"`` or a hub
    kernel (``"kernels-community/flash-attn2"``). ``None``: what the config would load
    (its own ``attn_implementation`` if it names one, else transformers' default:
    SDPA where the model supports it, eager where it does not)."""

    def describe(self) -> str:
        """One line for people, e.g. ``"batch 2 x 8192 tokens, packed (position_ids)"``."""
        text = f"batch {self.batch} x {self.seq_len} tokens"
        if self.padding is not Padding.NONE:
            text += f", {self.padding.value} padding"
        if self.packing is not Packing.NONE:
            text += f", packed ({self.packing.value}, {len(self.documents)} documents per row)"
        if self.use_cache is not None:
            text += f", use_cache={self.use_cache}"
        if self.gradient_checkpointing:
            text += ", gradient checkpointing"
        if self.attn_implementation is not None:
            text += f", {self.attn_implementation}"
        return text


def scenario_inputs(
    scenario: MaskScenario,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None]:
    shape = (scenario.batch, scenario.seq_len)
    input_ids = np.zeros(shape, dtype=np.int64)
    attention: npt.NDArray[np.int64] | None = np.ones(shape, dtype=np.int64)
    positions: npt.NDArray[np.int64] | None = None
    match scenario.padding:
        case Padding.NONE:
            pass
        case Padding.RIGHT:
            assert attention is not None
            for row, length in enumerate(scenario.lengths):
                attention[row, length:] = 0
        case Padding.LEFT:
            assert attention is not None
            for row, length in enumerate(scenario.lengths):
                attention[row, : scenario.seq_len - length] = 0
        case _ as unreachable:  # pragma: no cover
            assert_never(unreachable)
    match scenario.packing:
        case Packing.NONE:
            pass
        case Packing.POSITION_IDS | Packing.ALL_ONES_MASK:
            one_row = np.concatenate([np.arange(n, dtype=np.int64) for n in scenario.documents])
            positions = np.tile(one_row, (scenario.batch, 1))
            if scenario.packing is Packing.POSITION_IDS:
                attention = None
        case _ as unknown:  # pragma: no cover
            assert_never(unknown)
    return input_ids, attention, positions
