"""Bounds on what the mask probe is given, checked before it allocates.

:func:`check_allocation`: the inputs, embeddings and rotary tables the probe's forward
holds for a scenario, refused when they exceed this machine's memory.

:func:`cut` and :meth:`LayerPlan.expand`: a deep config's layer pattern, probed once
and repeated.

The probe runs one forward, a layer at a time; a config of 10**6 layers would take
hours and memory in proportion. The probe's answer for a layer depends on what the
config says of that layer, and configs say it in per-layer lists (``layer_types``,
``no_rope_layers``) or lists of layer indices (``moe_layers``). Past
:data:`EXACT_LAYERS` layers, the smallest period those lists repeat with is found,
a model of a few periods (at least :data:`PROBED_LAYERS` layers) is probed, and the
recorded calls of its last period stand for every later layer.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, cast, final

import attrs

from probewise.errors import InvalidInputError, UnsupportedModelError
from probewise.throughput.attention._records import RawCall, RecordedRun

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = [
    "EXACT_LAYERS",
    "MAX_LAYERS",
    "PROBED_LAYERS",
    "LayerPlan",
    "check_allocation",
    "cut",
    "shortened",
]

EXACT_LAYERS: Final = 256
"""Up to this many layers every layer is probed (more than any published model has)."""
PROBED_LAYERS: Final = 64
"""Past :data:`EXACT_LAYERS`, at least this many layers (whole periods) are probed."""
MAX_PERIOD: Final = EXACT_LAYERS
MAX_LAYERS: Final = 1 << 20
"""The most layers a report lists (one row each): larger configs are refused."""


def _period(values: Sequence[object]) -> int | None:
    """The smallest p <= MAX_PERIOD with values[i] == values[i - p] for all i; None."""
    for p in range(1, min(MAX_PERIOD, len(values)) + 1):
        if list(values[p:]) == list(values[:-p]):
            return p
    return None


def _is_index_list(values: Sequence[object], layers: int) -> bool:
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(ints) != len(values) or not ints:
        return False
    return all(0 <= a < b for a, b in itertools.pairwise(ints)) and ints[-1] < layers


def shortened(text: PretrainedConfig) -> tuple[PretrainedConfig, int, int]:
    """``text`` cut to whole periods of its layer pattern, the layer count it states
    and the period; ``text`` itself (period 0) when it is probed layer by layer."""
    layers = getattr(text, "num_hidden_layers", None)
    if not isinstance(layers, int) or layers <= EXACT_LAYERS:
        return text, 0, 0
    if layers > MAX_LAYERS:
        raise InvalidInputError(
            f"num_hidden_layers is {layers:,}: the probe reports at most {MAX_LAYERS:,} layers"
        )
    data = text.to_dict()
    per_layer: dict[str, list[object]] = {}
    indices: dict[str, list[int]] = {}
    period = 1
    for key, value in data.items():
        if not isinstance(value, list | tuple):
            continue
        items = list(cast("Sequence[object]", value))
        if key.endswith("layers") and _is_index_list(items, layers):
            ints = cast("list[int]", items)
            members = set(ints)
            found = _period([i in members for i in range(layers)])
            indices[key] = ints
        elif len(items) == layers:
            found = _period(items)
            per_layer[key] = items
        else:
            continue
        if found is None:
            raise InvalidInputError(
                f"{key} in a config of {layers:,} layers does not repeat with a period of at "
                f"most {MAX_PERIOD}: the probe runs at most {EXACT_LAYERS} layers one by one"
            )
        period = math.lcm(period, found)
        if period > MAX_PERIOD:
            raise InvalidInputError(
                f"the per-layer fields of a config of {layers:,} layers repeat only every "
                f"{period} layers: the probe runs at most {EXACT_LAYERS} layers one by one"
            )
    probed = period * math.ceil(PROBED_LAYERS / period)
    data["num_hidden_layers"] = probed
    for key, items in per_layer.items():
        data[key] = items[:probed]
    for key, ints in indices.items():
        data[key] = [i for i in ints if i < probed]
    data.pop("model_type", None)
    try:
        short = type(text).from_dict(data)  # pyright: ignore[reportUnknownMemberType]
    except Exception as error:  # transformers' and huggingface_hub's own types
        raise UnsupportedModelError(
            f"cannot cut {type(text).__name__} to {probed} layers for the probe: "
            f"{type(error).__name__}"
        ) from None
    return short, layers, period


@final
@attrs.frozen(kw_only=True)
class LayerPlan:
    """How the probed layers stand for the layers the config states."""

    layers: int = 0
    """The layers the config states (0: every layer is probed)."""
    probed: int = 0
    period: int = 0

    def expand(self, run: RecordedRun) -> RecordedRun:
        """``run`` with the last probed period's calls repeated up to :attr:`layers`."""
        if not self.period:
            return run
        probed, period = self.probed, self.period
        last: dict[int, list[RawCall]] = {}
        for call in run.calls:
            if call.layer_index >= probed - period:
                last.setdefault(call.layer_index % period, []).append(call)
        calls = list(run.calls)
        for index in range(probed, self.layers):
            calls.extend(
                attrs.evolve(call, layer_index=index) for call in last.get(index % period, ())
            )
        return attrs.evolve(run, calls=tuple(calls))


def cut(text: PretrainedConfig) -> tuple[PretrainedConfig, LayerPlan]:
    """The config the probe runs (``text``, or whole periods of its layer pattern) and
    how its layers stand for the ones ``text`` states."""
    short, layers, period = shortened(text)
    if not period:
        return text, LayerPlan()
    probed = cast("int", getattr(short, "num_hidden_layers"))  # noqa: B009
    return short, LayerPlan(layers=layers, probed=probed, period=period)


def _memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None


def check_allocation(
    *, batch: int, seq_len: int, hidden: int, head_dim: int, itemsize: int
) -> None:
    """Refuse a scenario whose forward cannot fit in this machine's memory.

    The count is a floor of what the probe's forward holds at once, whatever the
    model: the token ids, attention mask and positions (int64, in numpy and in torch),
    the embeddings' output (``hidden`` wide) and the rotary cos and sin tables
    (``head_dim`` wide), all per token of the batch.
    """
    tokens = batch * seq_len
    floor = tokens * (6 * 8 + (hidden + 2 * head_dim) * itemsize)
    memory = _memory()
    if memory is not None and floor > memory:
        raise InvalidInputError(
            f"the probe would hold at least {floor / 2**30:,.0f} GiB for batch {batch:,} x "
            f"{seq_len:,} tokens (hidden size {hidden:,}, head dim {head_dim:,}): more than "
            f"this machine's {memory / 2**30:,.0f} GiB"
        )
