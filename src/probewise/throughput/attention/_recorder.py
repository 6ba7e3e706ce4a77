"""Runs the model of a resolved config and records every SDPA call it makes.

The recording stage of the mask probe: it takes a :class:`._config.ResolvedConfig`
(everything about the config is settled there) and returns plain records
(:mod:`._records`). The model is the real transformers class for the config with
``attn_implementation="sdpa"`` (or the implementation resolved), built on the meta
device from the config shrunk in width only (intermediate sizes, vocabulary and,
where the family reads an explicit head dim, the hidden size); the number of layers,
the layer-type pattern, the sliding window, the head counts and the head dims are
the config's own.

What runs for real, on CPU: the embeddings, the rotary tables and transformers' own
mask construction (``masking_utils``: which mask each layer gets, composed from which
mask functions, and whether ``is_causal`` replaces it), which is what the probe is
about. Only the last step, ``sdpa_mask`` evaluating the composed function on every
(query, key) pair, is not run where the function is one
:mod:`probewise.throughput.attention._mask_function` models: that module reads it as one key
interval per query row instead (O(length), where the dense mask is O(length^2), 32
GiB for two rows of 131,072 tokens), and the forward gets a one-element stand-in
expanded to the mask's shape. The bytes transformers would have allocated are still
reported. What runs
on the meta device (shapes and dtypes, no arithmetic): the decoder layers, so their
projections cost nothing at any width or length. A pre-hook moves each layer's
inputs to the meta device except its attention mask (the 4-D tensor transformers
built), and ``torch.nn.functional.scaled_dot_product_attention`` is replaced for the
duration of the forward by a recorder that keeps the call's arguments and returns
an empty tensor of the output's shape (:mod:`._calls`). Everything between the mask builder and the
SDPA call (``sdpa_attention_forward``: the GQA decision, ``repeat_kv``, the
``is_causal`` rule) is transformers' own code, unmodified.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping
from typing import cast, final

import attrs
import numpy as np
import numpy.typing as npt
import torch
import transformers
from transformers import PretrainedConfig

from probewise._progress import ProgressBar, progress_bar
from probewise.errors import UnsupportedModelError
from probewise.throughput.attention._band import RowIntervals
from probewise.throughput.attention._calls import CallRecorder, recording
from probewise.throughput.attention._config import ResolvedConfig, quiet_transformers
from probewise.throughput.attention._records import RecordedRun
from probewise.throughput.attention._scenario import AttentionKind, MaskScenario, scenario_inputs
from probewise.throughput.attention._stand_ins import StandIn, stand_in_for

__all__ = ["PROGRESS_DELAY_S", "record_calls"]

PROGRESS_DELAY_S = 2.0
"""Seconds of work before the progress bar appears (when asked for)."""


def _decoder_layers(model: torch.nn.Module, num_layers: int) -> torch.nn.ModuleList:
    layers = getattr(model, "layers", None)
    if isinstance(layers, torch.nn.ModuleList) and len(layers) == num_layers:
        return layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == num_layers:
            return module
    raise UnsupportedModelError(
        f"{type(model).__name__}: no list of {num_layers} decoder layers found"
    )


def _to_meta(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value if value.is_meta or value.ndim == 4 else value.to("meta")
    if isinstance(value, tuple):
        return tuple(_to_meta(v) for v in cast("tuple[object, ...]", value))
    return value


def _from_meta(value: object) -> object:
    if isinstance(value, torch.Tensor) and value.is_meta:
        return torch.empty(value.shape, dtype=value.dtype)
    if isinstance(value, tuple):
        return tuple(_from_meta(v) for v in cast("tuple[object, ...]", value))
    return value


def _layer_pre_hook(
    _module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[tuple[object, ...], dict[str, object]]:
    moved = {k: (v if k == "attention_mask" else _to_meta(v)) for k, v in kwargs.items()}
    return tuple(_to_meta(a) for a in args), moved


def _layer_pre_hook_keeping_positions(
    _module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[tuple[object, ...], dict[str, object]]:
    kept = ("attention_mask", "position_ids")
    moved = {k: (v if k in kept else _to_meta(v)) for k, v in kwargs.items()}
    return tuple(_to_meta(a) for a in args), moved


def _layer_post_hook(_module: torch.nn.Module, _args: tuple[object, ...], output: object) -> object:
    return _from_meta(output)


class _StandInEscaped(Exception):
    """A mask reached SDPA that is not one of the stand-ins the probe handed out."""


def _attention_modules(layer: torch.nn.Module) -> list[torch.nn.Module]:
    return [
        m
        for m in layer.modules()
        if "Attention" in type(m).__name__ and isinstance(getattr(m, "layer_idx", None), int)
    ]


def _allowed(mask: torch.Tensor) -> tuple[npt.NDArray[np.bool_], bool]:
    """``allowed[b, q, k]`` from a 4-D bool or additive mask; and whether heads differ."""
    if mask.dtype != torch.bool:
        mask = mask > torch.finfo(mask.dtype).min / 2
    if mask.ndim != 4:
        raise UnsupportedModelError(f"an attention mask of {mask.ndim} dims reached SDPA")
    differ = mask.shape[1] > 1 and not bool((mask == mask[:, :1]).all())
    head0 = mask[:, 0]
    return cast("npt.NDArray[np.bool_]", head0.numpy()), differ


def record_calls(
    resolved: ResolvedConfig,
    scenario: MaskScenario,
    *,
    dtype: str,
    progress: bool = False,
    dense_masks: bool = False,
) -> RecordedRun:
    """Build the shrunk model of ``resolved`` and run one forward of ``scenario``,
    recording SDPA calls (or, under another implementation, its attention calls: see
    :mod:`probewise.throughput.attention._implementations`).

    The forward is the one a caller runs: ``model.train(training)`` with gradients on
    in training, ``use_cache`` passed as given (``None``: not passed, so the config's
    own value applies), and with ``gradient_checkpointing`` the model's own
    ``activation_checkpointing_enable()``, so that transformers itself decides what the
    flags do (e.g. it turns the cache off under checkpointing in training only).

    First at a tiny hidden size; if that fails, or records a head dim the config does
    not state (a family that derives its head dim from the hidden size, e.g.
    GPT-NeoX), once more at the config's own hidden size (the layers are on the meta
    device either way, so only the embeddings and the norms pay for the width).

    Masks are read as row intervals from the mask function transformers composed
    (:mod:`probewise.throughput.attention._mask_function`), without building them, wherever
    that module models the function; ``dense_masks`` lets transformers build every
    mask and reads the dense tensors instead (the ground truth the tests compare
    against). Either way each mask's bytes are those transformers' own ``sdpa_mask``
    allocates for it.
    """
    forward = _Forward(
        inputs=scenario_inputs(scenario),
        dtype=cast("torch.dtype", getattr(torch, dtype)),
        training=scenario.training,
        use_cache=scenario.use_cache,
        gradient_checkpointing=scenario.gradient_checkpointing,
        progress=progress,
        dense_masks=dense_masks,
    )
    with quiet_transformers():
        run = None
        if resolved.narrow is not None:
            try:
                run = _run_once(resolved.narrow, resolved, forward)
            except _Refused:
                raise
            except UnsupportedModelError:
                run = None
        if run is None or not {c.query_shape[3] for c in run.calls} <= resolved.head_dims:
            if isinstance(resolved.wide, UnsupportedModelError):
                raise resolved.wide from None
            run = _run_once(resolved.wide, resolved, forward)
    if not run.calls:
        implementation = resolved.implementation
        sdpa = implementation == "sdpa"
        called = "scaled_dot_product_attention" if sdpa else f"{implementation} attention"
        route = "SDPA" if sdpa else implementation
        raise UnsupportedModelError(
            f"{run.architecture} made no {called} call (transformers "
            f"{transformers.__version__}): its attention does not go through {route} "
            "(e.g. linear-attention layers only), so there is nothing to probe"
        )
    return run


_Inputs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None]


@final
@attrs.frozen(kw_only=True, eq=False)
class _Forward:
    """The forward the caller runs: its inputs, dtype and flags (internal)."""

    inputs: _Inputs
    dtype: torch.dtype
    training: bool
    use_cache: bool | None
    gradient_checkpointing: bool
    progress: bool
    dense_masks: bool


class _Refused(UnsupportedModelError):
    """transformers itself refused the combination: no wider retry will change that."""


def _enable_checkpointing(model: torch.nn.Module) -> None:
    """The model's own switch (``activation_checkpointing_enable`` from transformers
    5.x, ``gradient_checkpointing_enable`` before), so its refusal is transformers' own."""
    enable = cast(
        "Callable[[], None] | None",
        getattr(model, "activation_checkpointing_enable", None)
        or getattr(model, "gradient_checkpointing_enable", None),
    )
    if enable is None:
        raise _Refused(
            f"{type(model).__name__} has no gradient checkpointing switch in transformers "
            f"{transformers.__version__}"
        )
    try:
        enable()
    except ValueError as error:
        raise _Refused(
            f"transformers {transformers.__version__} refuses gradient checkpointing: {error}"
        ) from None


def _returned_cache(output: object) -> bool:
    """Whether the forward's output holds a cache (``cache`` from transformers 5.x,
    ``past_key_values`` before; read as mapping keys, not deprecated attributes)."""
    if isinstance(output, Mapping):
        fields = cast("Mapping[str, object]", output)
        return fields.get("cache") is not None or fields.get("past_key_values") is not None
    return False


def _run_once(shrunk: PretrainedConfig, resolved: ResolvedConfig, forward: _Forward) -> RecordedRun:
    # Shown only once the work passes PROGRESS_DELAY_S (thousands of layers take
    # minutes); created before the model is built, so the build counts towards it.
    bar = progress_bar(
        total=resolved.num_layers,
        desc=f"mask probe ({resolved.model_type})",
        unit="layer",
        delay=PROGRESS_DELAY_S,
        file=sys.stderr,
        disable=not forward.progress,
        leave=False,
    )
    with bar:
        if not forward.dense_masks:
            try:
                return _build_and_run(shrunk, resolved, forward, bar=bar)
            except _StandInEscaped:
                bar.reset()  # a mask SDPA got is not one the probe handed out: read dense
        return _build_and_run(shrunk, resolved, forward, bar=bar, structured=False)


def _build_model(
    shrunk: PretrainedConfig, resolved: ResolvedConfig, torch_dtype: torch.dtype
) -> tuple[torch.nn.Module, torch.nn.ModuleList]:
    """The model on the meta device and its decoder layers; everything but the layers
    is moved to the CPU and initialised (the embeddings, rotary tables and norms run
    for real). A flash implementation cannot load without its kernels: the model is
    built eager and then switched to it (``config._attn_implementation``), so that
    transformers routes the forward as it would with the kernels installed."""
    implementation = resolved.implementation
    flash = resolved.kind is AttentionKind.FLASH
    try:
        with torch.device("meta"):
            model = cast(
                "torch.nn.Module",
                transformers.AutoModel.from_config(  # type: ignore[no-untyped-call]
                    copy.deepcopy(shrunk),
                    attn_implementation="eager" if flash else implementation,
                    dtype=torch_dtype,
                ),
            )
        if flash:
            config = cast("PretrainedConfig", getattr(model, "config"))  # noqa: B009
            config._attn_implementation = implementation  # pyright: ignore[reportPrivateUsage]
    except Exception as error:  # whatever the config made transformers raise
        raise resolved.build_error(error) from None
    layers = _decoder_layers(model, resolved.num_layers)
    # transformers' initialiser of one module has no public name (``init_weights``
    # initialises the whole model, meta-device layers included).
    init_weights = cast(
        "Callable[[torch.nn.Module], None]",
        getattr(model, "_init_weights"),  # noqa: B009  (a protected member, read as such)
    )
    for child in model.children():
        if child is layers:
            continue
        child.to_empty(device="cpu")
        for sub in child.modules():
            init_weights(sub)
    return model, layers


def _hook_layers(
    layers: torch.nn.ModuleList,
    current: list[torch.nn.Module],
    bar: ProgressBar,
    *,
    keep_positions: bool = False,
) -> list[torch.utils.hooks.RemovableHandle]:
    """Hooks that run each layer on the meta device, advance ``bar`` once per layer,
    and keep the attention module that is running last in ``current``;
    ``keep_positions`` leaves ``position_ids`` real too (the flash path reads them)."""
    handles: list[torch.utils.hooks.RemovableHandle] = []
    pre_hook = _layer_pre_hook_keeping_positions if keep_positions else _layer_pre_hook

    def advance(_module: torch.nn.Module, _args: tuple[object, ...], _out: object) -> None:
        bar.update()

    def enter(module: torch.nn.Module, _args: tuple[object, ...]) -> None:
        current.append(module)

    def leave(_module: torch.nn.Module, _args: tuple[object, ...], _out: object) -> None:
        if current:
            current.pop()

    for layer in layers:
        handles.append(layer.register_forward_pre_hook(pre_hook, with_kwargs=True))
        handles.append(layer.register_forward_hook(_layer_post_hook))
        handles.append(layer.register_forward_hook(advance))
        for attention in _attention_modules(layer):
            handles.append(attention.register_forward_pre_hook(enter))
            handles.append(attention.register_forward_hook(leave))
    return handles


def _forward(
    model: torch.nn.Module,
    forward: _Forward,
    handles: list[torch.utils.hooks.RemovableHandle],
    *,
    recorder: CallRecorder,
    stand_ins: dict[int, StandIn],
    structured: bool,
) -> object:
    """The caller's forward, with :meth:`CallRecorder.record` as SDPA (and, when
    ``structured``, stand-in masks); the hooks are removed after it."""
    input_ids, attention_mask, position_ids = forward.inputs
    ids = torch.as_tensor(input_ids)
    mask = None if attention_mask is None else torch.as_tensor(attention_mask)
    positions = None if position_ids is None else torch.as_tensor(position_ids)
    extra: dict[str, object] = {}
    if forward.use_cache is not None:
        extra["use_cache"] = forward.use_cache
    try:
        if forward.gradient_checkpointing:
            _enable_checkpointing(model)
        model.train(forward.training)
        # A training forward runs with gradients on: transformers' checkpointing rules
        # (merge_with_config_defaults, GradientCheckpointingLayer) read is_grad_enabled().
        with (
            torch.set_grad_enabled(forward.training),
            recording(recorder, stand_ins, structured=structured),
        ):
            return cast(
                "object",
                model(input_ids=ids, attention_mask=mask, position_ids=positions, **extra),
            )
    except UnsupportedModelError:
        raise
    except Exception as error:  # any failure inside transformers' forward
        raise UnsupportedModelError(
            f"the probe could not run {type(model).__name__} "
            f"(transformers {transformers.__version__}): {type(error).__name__}: {error}"
        ) from None
    finally:
        for handle in handles:
            handle.remove()


def _read_masks(
    kept: Mapping[int, torch.Tensor], stand_ins: Mapping[int, StandIn]
) -> tuple[dict[int, npt.NDArray[np.bool_] | RowIntervals], dict[int, int], frozenset[int]]:
    """Each kept mask read (as the stand-in's row intervals, or dense), its bytes, and
    the ids of the masks whose heads differ."""
    masks: dict[int, npt.NDArray[np.bool_] | RowIntervals] = {}
    sizes: dict[int, int] = {}
    differ: set[int] = set()
    for mask_id, tensor in kept.items():
        stand_in = stand_in_for(tensor, stand_ins)
        if stand_in is not None:
            masks[mask_id] = stand_in.intervals
            sizes[mask_id] = stand_in.nbytes
            continue
        if stand_ins:
            raise _StandInEscaped  # a mask derived from a stand-in, or built elsewhere
        allowed, heads_differ = _allowed(tensor)
        masks[mask_id] = allowed
        sizes[mask_id] = int(tensor.untyped_storage().nbytes())
        if heads_differ:
            differ.add(mask_id)
    return masks, sizes, frozenset(differ)


def _build_and_run(
    shrunk: PretrainedConfig,
    resolved: ResolvedConfig,
    forward: _Forward,
    *,
    bar: ProgressBar,
    structured: bool = True,
) -> RecordedRun:
    model, layers = _build_model(shrunk, resolved, forward.dtype)
    current: list[torch.nn.Module] = []
    flash = resolved.kind is AttentionKind.FLASH
    handles = _hook_layers(layers, current, bar, keep_positions=flash)
    recorder = CallRecorder(resolved, current)
    stand_ins: dict[int, StandIn] = {}
    output = _forward(
        model, forward, handles, recorder=recorder, stand_ins=stand_ins, structured=structured
    )
    masks, sizes, differ = _read_masks(recorder.kept, stand_ins)
    return RecordedRun(
        model_type=resolved.model_type,
        architecture=type(model).__name__,
        calls=tuple(recorder.calls),
        masks=masks,
        mask_bytes=sizes,
        heads_differ=differ,
        kv_cache=_returned_cache(output),
        attn_implementation=resolved.implementation,
    )
