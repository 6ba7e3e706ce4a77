"""The mask probe: which attention layers keep SDPA's fast path, without weights or a GPU.

(Under eager, flex_attention or FlashAttention it records those calls instead: see
:mod:`probewise.throughput.attention._implementations`.)

SDPA's backend choice and transformers' mask construction depend on shapes, dtype
and whether a mask is present, not on weight values. So :func:`probe_masks` builds
the real transformers model class for a config (``attn_implementation="sdpa"``),
shrunk in width but not in layer pattern, runs one forward pass on CPU through
transformers' own code, and records every ``scaled_dot_product_attention`` call
(see :mod:`probewise.throughput.attention._recorder` for how, and what runs where). Each
call is then read into a :class:`LayerAttention`: its mask kind, ``is_causal``, how
GQA was handled, the mask's band structure and bytes, and the CUDA backend
:func:`~probewise.throughput.attention.sdpa.predict_backend` says it would get.

Masks are read from the mask function transformers composed, as one key interval per
query row (:mod:`probewise.throughput.attention._mask_function`), not from the dense tensor, so
the probe's cost grows linearly with the sequence length while the bytes it reports
(what transformers would allocate) grow with its square.

One pass, each stage calling only the next one down: :mod:`._config` loads and
resolves the config once (a :class:`._config.ResolvedConfig`), :mod:`._recorder`
records the forward's calls as plain records (:mod:`._records`), and this module
reads each recorded call and mask into the report. torch and transformers are
imported only when :func:`probe_masks` runs.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, assert_never, cast, final

import attrs

from probewise import _json
from probewise._extras import Extra, requires
from probewise._validation import non_negative, positive
from probewise.errors import (
    ArgumentTypeValueError,
    CrossDocumentAttentionError,
    FastPathLostError,
    InvalidInputError,
    UnsupportedModelError,
)
from probewise.throughput._torch_dtype import TorchDtype
from probewise.throughput.attention._band import Band, BandKind
from probewise.throughput.attention._bundled import bundled_configs
from probewise.throughput.attention._kernel_paths import (
    eager_path,
    flash_path,
    flex_path,
    mib,
    sdpa_path,
)
from probewise.throughput.attention._mask_reads import MaskReader
from probewise.throughput.attention._paths import FlexBlocks, KernelPath
from probewise.throughput.attention._scenario import (
    IMPLEMENTATIONS,
    AttentionKind,
    MaskScenario,
    Packing,
    Padding,
    attention_kind,
)
from probewise.throughput.attention._sdpa_types import (
    FAST_BACKENDS,
    AttentionDtype,
    BackendPrediction,
    MaskKind,
    SdpaBackend,
    SdpaCall,
    as_capability,
)
from probewise.throughput.attention.sdpa import predict_backend

if TYPE_CHECKING:
    from transformers import PretrainedConfig

    from probewise.throughput.attention._records import RawCall, RecordedRun


__all__ = [
    "IMPLEMENTATIONS",
    "Band",
    "BandKind",
    "FlexBlocks",
    "GqaHandling",
    "KernelPath",
    "LayerAttention",
    "MaskReport",
    "MaskScenario",
    "Packing",
    "Padding",
    "bundled_configs",
    "probe_masks",
]


@enum.unique
class GqaHandling(enum.Enum):
    """How a layer's key/value heads met its query heads (:attr:`LayerAttention.gqa`)."""

    NONE = "none"
    """As many key/value heads as query heads: nothing to do."""
    NATIVE = "native"
    """``enable_gqa=True`` was passed: SDPA shares each key/value head itself."""
    REPEATED = "repeated"
    """transformers repeated the key/value heads to the query heads (``repeat_kv``)
    before the call: more memory traffic, and the kernel sees plain MHA."""


def _band_json(layer: LayerAttention) -> dict[str, object]:
    """The band's fields and, for people reading the JSON, its description."""
    return {**_json.to_dict(layer.band), "description": layer.band.describe()}


def _rulings_json(layer: LayerAttention) -> dict[SdpaBackend, tuple[str, ...]] | None:
    """Each backend's reasons against the call (none: usable); ``None`` off SDPA."""
    if layer.prediction is None:
        return None
    return {ruling.backend: ruling.reasons for ruling in layer.prediction.rulings}


# The JSON flattens ``call`` and ``prediction``: the call's figures are read with
# attrgetter, not through five properties that would only restate ``call`` in the API.
@_json.shaped(
    _json.Shape(
        after={  # the keys in order, each after the one before
            "mask": "sliding_window",
            "mask_bytes": "mask",
            "is_causal": "mask_bytes",
            "band": "is_causal",
            "gqa": "band",
            "query_heads": "gqa",
            "kv_heads": "query_heads",
            "kv_heads_in_call": "kv_heads",
            "head_dim": "kv_heads_in_call",
            "dtype": "head_dim",
            "dropout": "dtype",
            "backend": "dropout",
            "fast_path": "backend",
            "mask_redundant": "fast_path",
            "cross_document": "mask_redundant",
            "lost_reasons": "cross_document",
            "rulings": "lost_reasons",
            "kernel": "rulings",
        },
        omit={"call", "prediction"},
        derived={
            "band": _band_json,
            "query_heads": operator.attrgetter("call.query_heads"),
            "kv_heads_in_call": operator.attrgetter("call.kv_heads"),
            "head_dim": operator.attrgetter("call.head_dim"),
            "dtype": operator.attrgetter("call.dtype"),
            "dropout": operator.attrgetter("call.dropout"),
            "lost_reasons": operator.methodcaller("lost_reasons"),
            "rulings": _rulings_json,
        },
    )
)
@final
@attrs.frozen(kw_only=True)
class LayerAttention:
    """One attention layer's SDPA call, read."""

    index: int = attrs.field(validator=non_negative)
    """The layer's index in the model."""
    layer_type: str
    """The config's word for the layer, e.g. ``"sliding_attention"``."""
    sliding_window: int | None
    """The layer's sliding window, when it has one."""
    call: SdpaCall
    """The shapes and flags of the attention call as transformers made it (for eager,
    the additive mask it always passes; for flex and flash, no dense mask)."""
    kv_heads: int = attrs.field(validator=positive)
    """Key/value heads of the layer before any repeat."""
    gqa: GqaHandling
    """How grouped-query attention was handled."""
    band: Band
    """The mask's structure (:attr:`BandKind.NONE` when no mask was passed)."""
    mask_bytes: int = attrs.field(validator=non_negative)
    """Bytes of the mask tensor this layer received (shared between layers that get
    the same one); 0 without a mask."""
    cross_document: bool | None
    """For packed scenarios: whether a query attends a key of another document (a
    correctness bug). ``None`` when the scenario is not packed."""
    prediction: BackendPrediction | None
    """The CUDA backend SDPA would choose for this call, with the reasons for the
    others; ``None`` under an implementation other than SDPA."""
    kernel: KernelPath
    """Which kernel path runs, under the report's implementation, and why."""

    @property
    def mask(self) -> MaskKind:
        """The kind of mask passed to SDPA."""
        return self.call.mask

    @property
    def is_causal(self) -> bool:
        """The ``is_causal`` flag passed to SDPA."""
        return self.call.is_causal

    @property
    def backend(self) -> SdpaBackend | None:
        """The predicted CUDA backend of SDPA (``None`` under another implementation)."""
        return None if self.prediction is None else self.prediction.backend

    @property
    def fast_path(self) -> bool:
        """Under SDPA: no mask tensor, and a flash or cuDNN kernel predicted. Under
        another implementation: a fused kernel with no dense mask (flex and
        FlashAttention always; eager never)."""
        if self.prediction is None:
            return self.kernel.fused
        return self.call.mask is MaskKind.NONE and self.prediction.fast

    @property
    def mask_redundant(self) -> bool:
        """A mask was materialised that says nothing ``is_causal`` could not (plain
        causal or full, no padding): the fast path was lost for nothing."""
        return (
            self.prediction is not None
            and self.call.mask is not MaskKind.NONE
            and self.band.kind in (BandKind.CAUSAL, BandKind.FULL)
            and not self.band.padded
        )

    def to_dict(self) -> dict[str, object]:
        """The layer as JSON (the call's figures flattened; what ``probewise masks
        --json`` writes per layer)."""
        return _json.to_dict(self)

    def lost_reasons(self) -> tuple[str, ...]:
        """Why the fast path was lost; empty when it was kept."""
        if self.fast_path:
            return ()
        if self.prediction is None:
            return (
                f"{self.kernel.implementation} materialises a dense additive mask of "
                f"{mib(self.mask_bytes)} ({self.band.describe()}) and runs unfused "
                "matmul + softmax",
            )
        reasons: list[str] = []
        if self.call.mask is not MaskKind.NONE:
            text = (
                f"a {self.call.mask.value} mask of {mib(self.mask_bytes)} was materialised "
                f"({self.band.describe()})"
            )
            if self.mask_redundant:
                text += ": identical to what is_causal expresses"
            reasons.append(text)
        if self.gqa is GqaHandling.REPEATED:
            reasons.append(
                f"K/V repeated from {self.kv_heads} to {self.call.query_heads} heads (no native GQA)"
            )
        prediction = self.prediction
        for backend in FAST_BACKENDS:
            if backend is not prediction.backend:
                reasons.extend(prediction.reasons_lost(backend))
        return tuple(reasons)


def _layer_types_filter(layer_types: Iterable[str] | None) -> frozenset[str] | None:
    if layer_types is None:
        return None
    if isinstance(layer_types, str):
        return frozenset({layer_types})
    return frozenset(layer_types)


def _rules_version(report: MaskReport) -> str | None:
    """The predictor's rules version (every layer's is the same; None without layers
    or off SDPA)."""
    prediction = report.layers[0].prediction if report.layers else None
    return None if prediction is None else prediction.rules_version


@_json.shaped(
    _json.Shape(
        after={
            "transformers_version": "architecture",
            "kv_cache": "scenario",
            "attn_implementation": "kv_cache",
            "rules_version": "capability",
            "layers": "mask_bytes",
        },
        derived={"rules_version": _rules_version},
    )
)
@final
@attrs.frozen(kw_only=True)
class MaskReport:
    """Every SDPA call of one forward pass, per layer."""

    model_type: str
    """The config's ``model_type`` (of its text config for multimodal models)."""
    architecture: str
    """The transformers class that ran, e.g. ``"Gemma3TextModel"``."""
    scenario: MaskScenario
    """The batch that ran."""
    dtype: AttentionDtype
    """The dtype the model ran in."""
    capability: tuple[int, int]
    """The CUDA capability the backend predictions are for."""
    layers: tuple[LayerAttention, ...]
    """One entry per SDPA call, in order (one per attention layer in every family
    bundled here)."""
    mask_bytes: int = attrs.field(validator=non_negative)
    """Bytes of all distinct masks built for the forward."""
    transformers_version: str
    """The transformers whose code was recorded."""
    kv_cache: bool = False
    """Whether the forward built a KV cache (``use_cache`` was in effect). With a
    cache, transformers does not look for packed documents in ``position_ids``."""
    attn_implementation: str = "sdpa"
    """The attention implementation the forward ran (the scenario's, or the one the
    config would load)."""

    def to_dict(self) -> dict[str, object]:
        """The report as JSON (what ``probewise masks --json`` writes)."""
        return _json.to_dict(self)

    @property
    def layer_types(self) -> tuple[str, ...]:
        """The distinct layer types, in order of first appearance."""
        return tuple(dict.fromkeys(layer.layer_type for layer in self.layers))

    def lost_fast_path(
        self, *, layer_types: Iterable[str] | None = None
    ) -> tuple[LayerAttention, ...]:
        """The layers (of ``layer_types``, default all) that lost the fast path."""
        wanted = _layer_types_filter(layer_types)
        return tuple(
            layer
            for layer in self.layers
            if not layer.fast_path and (wanted is None or layer.layer_type in wanted)
        )

    def cross_document_layers(self) -> tuple[LayerAttention, ...]:
        """The layers in which packed documents attend to each other."""
        return tuple(layer for layer in self.layers if layer.cross_document)

    def assert_no_cross_document(self) -> None:
        """Raise :class:`~probewise.errors.CrossDocumentAttentionError` naming every layer
        in which packed documents attend to each other."""
        crossing = self.cross_document_layers()
        if crossing:
            raise CrossDocumentAttentionError(
                f"{_count(crossing)} of {_count(self.layers)} layers let packed documents attend "
                f"to each other ({self.scenario.describe()}): layers "
                f"{layer_ranges([layer.index for layer in crossing])} "
                f"({', '.join(sorted({layer.band.describe() for layer in crossing}))}). "
                f"This is a correctness bug, not a speed problem: {self.packing_fix()}."
            )

    def packing_fix(self) -> str:
        """What keeps packed documents apart in this forward, for people."""
        fixes: list[str] = []
        if self.scenario.packing is Packing.ALL_ONES_MASK:
            fixes.append(
                "pass position_ids with no attention mask (transformers then builds the "
                "block-diagonal mask), or a 4-D block-diagonal mask yourself"
            )
        if self.kv_cache:
            fixes.append(
                "the forward built a KV cache (use_cache="
                + ("True from the config" if self.scenario.use_cache is None else "True")
                + "), so transformers skipped packed-sequence detection: set "
                "config.use_cache=False, pass use_cache=False in the forward, or train with "
                "gradient checkpointing"
            )
        if not fixes:
            fixes.append(
                "pass position_ids with no attention mask and no cache, or a 4-D "
                "block-diagonal mask yourself"
            )
        return "; and ".join(fixes)

    def assert_fast_path(self, *, layer_types: Iterable[str] | None = None) -> None:
        """Raise unless every layer of ``layer_types`` (default all) keeps the fast path.

        Packed documents that attend to each other raise
        :class:`~probewise.errors.CrossDocumentAttentionError` first (a correctness bug
        outranks a speed one); then :class:`~probewise.errors.FastPathLostError` lists
        each layer that lost the fast path and why.
        """
        self.assert_no_cross_document()
        wanted = _layer_types_filter(layer_types)
        if wanted is not None:
            unknown = wanted - set(self.layer_types)
            if unknown:
                raise InvalidInputError(
                    f"no layer of type {', '.join(sorted(unknown))}; this model has "
                    f"{', '.join(self.layer_types)}"
                )
        lost = self.lost_fast_path(layer_types=layer_types)
        if not lost:
            return
        groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        for layer in lost:
            groups.setdefault((layer.layer_type, layer.lost_reasons()), []).append(layer.index)
        what = (
            "SDPA's fast path"
            if self.attn_implementation == "sdpa"
            else f"a fused kernel ({self.attn_implementation})"
        )
        lines = [
            f"{_count(lost)} of {_count(self.layers)} layers lost {what} "
            f"({self.model_type}, {self.scenario.describe()}, {self.dtype.value}, "
            f"sm{self.capability[0]}{self.capability[1]}):"
        ]
        for (layer_type, reasons), indices in groups.items():
            lines.append(f"  layers {layer_ranges(indices)} ({layer_type}): {'; '.join(reasons)}")
        raise FastPathLostError("\n".join(lines))


def _count(layers: Iterable[LayerAttention]) -> int:
    """Distinct layers (a layer that makes several SDPA calls counts once)."""
    return len({layer.index for layer in layers})


def layer_ranges(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    values = sorted(set(indices))
    parts: list[str] = []
    start = previous = values[0] if values else 0
    for value in values[1:]:
        if value != previous + 1:
            parts.append(f"{start}-{previous}" if previous > start else str(start))
            start = value
        previous = value
    if values:
        parts.append(f"{start}-{previous}" if previous > start else str(start))
    return ", ".join(parts)


def _call(**fields: object) -> SdpaCall:
    """An :class:`SdpaCall` from recorded fields; a call the predictor cannot model
    (e.g. keys and values with different head counts) is the model's limit, not a
    bad input of the caller's."""
    try:
        return SdpaCall(**fields)  # type: ignore[arg-type]
    except InvalidInputError as error:
        raise UnsupportedModelError(
            f"a recorded SDPA call has a shape the predictor does not model: {error}"
        ) from None


def probe_masks(
    config: PretrainedConfig | str | Path | Mapping[str, object],
    scenario: MaskScenario,
    *,
    dtype: AttentionDtype | str | TorchDtype,
    capability: tuple[int, int] = (9, 0),
    progress: bool = False,
) -> MaskReport:
    """Record every SDPA call of one forward of ``config``'s model on ``scenario``.

    Args:
        config: a transformers ``PretrainedConfig``, a path to a ``config.json`` (or a
            folder holding one), a dict of one, or the name of a bundled config
            (:func:`bundled_configs`). Multimodal configs are probed through their
            text config. Nothing is downloaded and no weights are loaded.
        scenario: the batch to run (shape, padding, packing) and the forward that runs
            it (training or not, ``use_cache``, gradient checkpointing).
        dtype: the dtype the model runs in (``"bfloat16"``, ``torch.float16``, ...).
        capability: the CUDA compute capability to predict backends for (9, 0 is H100
            / H200).
        progress: show a progress bar over the layers on stderr once the probe has run
            for about 2 s (a config with thousands of layers takes minutes).

    Under an attention implementation other than SDPA
    (:attr:`MaskScenario.attn_implementation`, or the one the config would load) the
    attention calls are recorded instead, and each layer's :attr:`LayerAttention.kernel`
    says which kernel path runs: see the attention-preflight how-to.

    Raises:
        UnsupportedModelError: the model does not support the scenario's attention
            implementation (e.g. SDPA for Gemma 2; transformers' own reason is quoted),
            transformers refuses the scenario's forward (e.g. gradient checkpointing on
            a model without it), or the model could not run on the probe.
        InvalidInputError: a bad config path, dtype or capability.
    """
    return _probe(config, scenario, dtype=dtype, capability=capability, progress=progress)


def _probe(
    config: PretrainedConfig | str | Path | Mapping[str, object],
    scenario: MaskScenario,
    *,
    dtype: AttentionDtype | str | TorchDtype,
    capability: tuple[int, int] = (9, 0),
    progress: bool = False,
    dense_masks: bool = False,
) -> MaskReport:
    """:func:`probe_masks`; ``dense_masks`` has transformers build every mask densely
    and reads those (the ground truth the structured reading is tested against)."""
    if not isinstance(cast("object", scenario), MaskScenario):
        raise ArgumentTypeValueError(
            f"scenario must be a MaskScenario, got {type(scenario).__name__}"
        )
    attention_dtype = AttentionDtype.parse(dtype)
    capability = as_capability(capability)  # before the probe runs, not after
    with requires(Extra.TORCH, "probe_masks"):
        # _config first, and it imports torch before transformers: a missing torch is
        # the one named.
        from probewise.throughput.attention import _config, _recorder

    try:
        resolved = _config.resolve(config, scenario, attention_dtype.value)  # before allocating
        run = _recorder.record_calls(
            resolved,
            scenario,
            dtype=attention_dtype.value,
            progress=progress,
            dense_masks=dense_masks,
        )
    except RuntimeError as error:
        refusal = _config.per_layer_refusal(error)
        if refusal is None:
            raise
        raise refusal from None
    run = resolved.layers.expand(run)  # a deep config's pattern, repeated
    masks = MaskReader(run, scenario)
    layers = _layers(run, masks, scenario, capability)
    distinct = {raw.mask_id: layer.mask_bytes for raw, layer in zip(run.calls, layers, strict=True)}
    import transformers

    return MaskReport(
        model_type=run.model_type,
        architecture=run.architecture,
        scenario=scenario,
        dtype=attention_dtype,
        capability=capability,
        layers=tuple(layers),
        mask_bytes=sum(n for mask_id, n in distinct.items() if mask_id is not None),
        transformers_version=str(transformers.__version__),
        kv_cache=run.kv_cache,
        attn_implementation=run.attn_implementation,
    )


def _layers(
    run: RecordedRun, masks: MaskReader, scenario: MaskScenario, capability: tuple[int, int]
) -> list[LayerAttention]:
    """Each call's layer; calls alike but for their layer (a deep config's repeated
    pattern) are read once."""
    read: dict[RawCall, LayerAttention] = {}
    out: list[LayerAttention] = []
    for raw in run.calls:
        key = attrs.evolve(raw, layer_index=0)
        known = read.get(key)
        if known is None:
            known = read[key] = _layer(raw, masks, scenario, capability)
            out.append(known)
        else:
            out.append(attrs.evolve(known, index=raw.layer_index))
    return out


def _layer(
    raw: RawCall, masks: MaskReader, scenario: MaskScenario, capability: tuple[int, int]
) -> LayerAttention:
    """One recorded attention call as a :class:`LayerAttention`: under SDPA with its
    predicted backend, under another implementation with its kernel path."""
    read = masks.read(raw)
    kind = attention_kind(masks.run.attn_implementation)
    batch, query_heads, query_length, head_dim = raw.query_shape
    dense = kind in (AttentionKind.SDPA, AttentionKind.EAGER)
    call = _call(
        batch=batch,
        query_heads=query_heads,
        # eager repeats K/V to the query heads itself (repeat_kv) before its matmul
        kv_heads=query_heads if kind is AttentionKind.EAGER else raw.key_shape[1],
        query_length=query_length,
        kv_length=raw.key_shape[2],
        head_dim=head_dim,
        value_head_dim=raw.value_shape[3],
        dtype=AttentionDtype.parse(raw.dtype),
        mask=read.kind if dense else MaskKind.NONE,
        mask_shape=raw.mask_shape if dense else None,
        is_causal=raw.is_causal,
        dropout=raw.dropout,
        enable_gqa=raw.enable_gqa,
        requires_grad=scenario.training,
    )
    if raw.kv_groups > 1:
        gqa = GqaHandling.NATIVE if raw.enable_gqa else GqaHandling.REPEATED
    else:
        gqa = GqaHandling.NONE
    prediction = None
    mask_bytes, cross, kernel = read.mask_bytes, read.cross_document, None
    match kind:
        case AttentionKind.SDPA:
            prediction = predict_backend(call, capability=capability)
            kernel = sdpa_path(call, prediction, capability)
        case AttentionKind.EAGER:
            kernel = eager_path(read.band, read.mask_bytes, raw.softcap, raw.sinks)
        case AttentionKind.FLEX:
            blocks = masks.blocks(raw.mask_id)
            mask_bytes = 0 if blocks is None else blocks.nbytes
            kernel = flex_path(read.band, blocks, raw.softcap, raw.sinks)
        case AttentionKind.FLASH:
            assert raw.flash is not None
            kernel, cross = flash_path(
                masks.run.attn_implementation, raw.flash, raw.sinks, scenario
            )
        case _ as unreachable:  # pragma: no cover
            assert_never(unreachable)
    return LayerAttention(
        index=raw.layer_index,
        layer_type=raw.layer_type,
        sliding_window=raw.sliding_window,
        call=call,
        kv_heads=max(1, query_heads // raw.kv_groups),
        gqa=gqa,
        band=read.band,
        mask_bytes=mask_bytes,
        cross_document=cross,
        prediction=prediction,
        kernel=kernel,
    )
