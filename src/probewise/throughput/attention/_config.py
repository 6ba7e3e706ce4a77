"""The mask probe's config, resolved once: from a bundled name, a ``config.json`` (or
its folder), a dict or a ``PretrainedConfig`` to one :class:`ResolvedConfig`, which
holds everything the recorder (:mod:`._recorder`) needs and nothing it must look up
again: the text config's family and model class, the attention implementation that
runs, the head dims the config states, its per-layer types, the layers probed for a
deep config (:mod:`._bounds`), and the config shrunk in width for the probe's model.

Every refusal of the config is raised here, before a model is built: a config
transformers refuses, a scenario past this machine's memory, a deep config whose
layers do not repeat, an implementation the model does not support.

Imports torch and transformers: imported only when :func:`~probewise.throughput.probe_masks` runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import cast, final

import attrs
import torch
import transformers
from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_MAPPING

from probewise._files import read_regular_file
from probewise.errors import ArgumentTypeValueError, InvalidInputError, UnsupportedModelError
from probewise.throughput.attention import _bounds
from probewise.throughput.attention._bundled import bundled_config
from probewise.throughput.attention._scenario import AttentionKind, MaskScenario, attention_kind

__all__ = ["ConfigSource", "ResolvedConfig", "quiet_transformers", "resolve"]

ConfigSource = PretrainedConfig | str | Path | Mapping[str, object]
"""What :func:`~probewise.throughput.probe_masks` takes as a config."""

_SHRUNK_INTERMEDIATE = 8
_SHRUNK_PER_LAYER_INPUT = 4


@final
@attrs.frozen(kw_only=True)
class ResolvedConfig:
    """A config the probe can run on a scenario, with what the recorder needs of it."""

    model_type: str
    """The text config's ``model_type``."""
    text: PretrainedConfig
    """The text config (of a multimodal config, its decoder's), cut to :attr:`layers`."""
    model_class: type[object]
    """transformers' base model class for it."""
    implementation: str
    """The attention implementation that runs (the scenario's, or the one the config
    would load)."""
    head_dims: frozenset[int]
    """The head dims the config states (any ``*head_dim`` field, else hidden size over
    heads)."""
    layer_types: tuple[str, ...]
    """The config's ``layer_types`` (empty when it has none)."""
    sliding_window: int | None
    """The config's model-wide ``sliding_window`` (used when it has no ``layer_types``)."""
    chunk_size: int | None
    """The config's ``attention_chunk_size`` (of its ``"chunked_attention"`` layers)."""
    num_layers: int
    """The layers the probe's model has (:attr:`layers` says what they stand for)."""
    layers: _bounds.LayerPlan
    """How the probed layers stand for the layers the config states."""
    narrow: PretrainedConfig | None
    """:attr:`text` at a tiny width and hidden size, head dims set explicitly (not
    every family reads them: the recorder checks); ``None`` where it cannot be shrunk so."""
    wide: PretrainedConfig | UnsupportedModelError
    """:attr:`text` at a tiny width but its own hidden size, which the recorder runs when
    the narrow model fails or derives another head dim; or why it cannot be shrunk
    (raised only then)."""

    @property
    def kind(self) -> AttentionKind:
        """The implementation's family."""
        return attention_kind(self.implementation)

    def build_error(self, error: Exception) -> InvalidInputError:
        """Why transformers could not build the model, naming the config field when it is
        one the probe can tell (an unknown rope type)."""
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        known = {"default", *ROPE_INIT_FUNCTIONS}
        for where, value in _rope_types(self.text.to_dict()):
            if value not in known:
                return InvalidInputError(
                    f"{where} {value!r} is not a rope type transformers "
                    f"{transformers.__version__} knows ({', '.join(sorted(known))})"
                )
        return UnsupportedModelError(
            f"transformers {transformers.__version__} could not build {type(self.text).__name__}'s "
            f"model for the probe: {_one_line(error)}"
        )


def per_layer_refusal(error: RuntimeError) -> UnsupportedModelError | None:
    """The probe's error for a config with per-layer values it read globally
    (transformers 5's ``per_layer_config``: reading a per-layer attribute from such a
    config raises ``AmbiguousGlobalPerLayerAttributeError``, a ``RuntimeError``), else
    None. Matched by name: the class lives in a transformers module that may move."""
    if type(error).__name__ != "AmbiguousGlobalPerLayerAttributeError":
        return None
    return UnsupportedModelError(
        "the config has per-layer values (per_layer_config) that the mask probe reads as "
        f"one for every layer, which it does not do yet: {_one_line(error)}"
    )


def resolve(config: ConfigSource, scenario: MaskScenario, dtype: str) -> ResolvedConfig:
    """``config`` loaded, checked against ``scenario`` in ``dtype`` (before anything is
    allocated), cut to its layer pattern, its implementation chosen and checked, and
    shrunk for the probe's model."""
    text = _text_config(load_config(config))
    _check_allocation(text, scenario, dtype)
    text, layers = _bounds.cut(text)
    model_class = cast("type[object] | None", MODEL_MAPPING.get(type(text), None))
    if model_class is None:
        raise UnsupportedModelError(
            f"transformers {transformers.__version__} has no base model for {type(text).__name__}"
        )
    implementation = _implementation(text, model_class, scenario.attn_implementation)
    _check_supported(text, model_class, implementation)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    hidden = int(getattr(text, "hidden_size", heads) or heads)
    chunk: object = getattr(text, "attention_chunk_size", None)
    window: object = getattr(text, "sliding_window", None)
    with quiet_transformers():
        try:
            narrow: PretrainedConfig | None = _shrunk(text, narrow=True)
        except UnsupportedModelError:
            narrow = None
        try:
            wide: PretrainedConfig | UnsupportedModelError = _shrunk(text, narrow=False)
        except UnsupportedModelError as error:
            wide = error
    return ResolvedConfig(
        model_type=str(text.model_type),
        text=text,
        model_class=model_class,
        implementation=implementation,
        head_dims=_head_dims(text.to_dict(), hidden, heads),
        layer_types=tuple(str(t) for t in getattr(text, "layer_types", None) or ()),
        sliding_window=window if isinstance(window, int) else None,
        chunk_size=chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else None,
        num_layers=int(getattr(text, "num_hidden_layers", 0)),
        layers=layers,
        narrow=narrow,
        wide=wide,
    )


def _check_allocation(text: PretrainedConfig, scenario: MaskScenario, dtype: str) -> None:
    heads = getattr(text, "num_attention_heads", 1)
    hidden = getattr(text, "hidden_size", 1)
    heads = heads if isinstance(heads, int) and heads > 0 else 1
    hidden = hidden if isinstance(hidden, int) and hidden > 0 else 1
    _bounds.check_allocation(
        batch=scenario.batch,
        seq_len=scenario.seq_len,
        hidden=hidden,
        head_dim=max(_head_dims(text.to_dict(), hidden, heads)),
        itemsize=cast("torch.dtype", getattr(torch, dtype)).itemsize,
    )


def load_config(config: ConfigSource) -> PretrainedConfig:
    """A transformers config from a config object, a bundled config's name, a
    ``config.json`` (or its folder), or a dict."""
    if isinstance(config, PretrainedConfig):
        return config
    bundled = bundled_config(config) if isinstance(config, str) else None
    if bundled is not None:
        return _from_dict(bundled, "the config mapping")  # as if the caller passed its dict
    if isinstance(config, (str, Path)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.exists():
            raise InvalidInputError(f"no config file at {path}")
        raw = read_regular_file(path)  # a FIFO or a device is refused, never read (it may block)
        try:
            # utf-8-sig: a BOM that an editor left at the start is not part of the JSON.
            data: object = json.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise InvalidInputError(f"cannot read {path} as JSON: {error}") from None
        except RecursionError:
            raise InvalidInputError(f"cannot read {path}: JSON nested too deeply") from None
        if not isinstance(data, dict):
            raise InvalidInputError(f"{path} holds JSON but not an object")
        return _from_dict(cast("dict[str, object]", data), str(path))
    if isinstance(cast("object", config), Mapping):
        return _from_dict(dict(config), "the config mapping")
    raise ArgumentTypeValueError(
        f"config must be a PretrainedConfig, a path or a mapping, got {type(config).__name__}"
    )


def _from_dict(data: dict[str, object], where: str) -> PretrainedConfig:
    model_type = data.get("model_type")
    if not isinstance(model_type, str):
        raise InvalidInputError(f'{where} has no model_type; add e.g. "model_type": "llama"')
    # "_probewise..." keys are notes in the bundled configs, not config fields.
    rest = {k: v for k, v in data.items() if k != "model_type" and not k.startswith("_probewise")}
    _check_sizes(rest, where)
    text_config = rest.get("text_config")
    if isinstance(text_config, Mapping):
        _check_sizes(cast("Mapping[str, object]", text_config), f"{where} (text_config)")
    if model_type not in CONFIG_MAPPING:
        raise UnsupportedModelError(
            f"transformers {transformers.__version__} has no model_type {model_type!r} "
            f"(from {where})"
        )
    try:
        with quiet_transformers():  # its log lines about the fields: the error says it
            return AutoConfig.for_model(model_type, **rest)  # pyright: ignore[reportUnknownMemberType]
    except Exception as error:  # transformers' and huggingface_hub's own types
        # e.g. StrictDataclassFieldValidationError, which names the field itself.
        raise InvalidInputError(
            f"transformers {transformers.__version__} refuses the {model_type} config in "
            f"{where}: {_one_line(error)}"
        ) from None


# Size fields that every family reads as positive integers, checked before transformers
# sees them: some it refuses with a multi-line error, some end in a ZeroDivisionError.
_SIZE_FIELDS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "intermediate_size",
    "head_dim",
    "vocab_size",
)  # not sliding_window: published configs use null and sometimes 0 for "none"


def _check_sizes(data: Mapping[str, object], where: str) -> None:
    for name in _SIZE_FIELDS:
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            # a value: what a config file holds, read as input, not an argument's type
            raise InvalidInputError(
                f"{name} in {where} must be a positive integer, got "
                f"{type(value).__name__} {value!r}"
            )
    heads, kv_heads = data.get("num_attention_heads"), data.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv_heads, int) and heads % kv_heads:
        raise InvalidInputError(
            f"num_key_value_heads ({kv_heads}) in {where} must divide num_attention_heads "
            f"({heads}): each key/value head serves a whole group of query heads"
        )


def _one_line(error: BaseException) -> str:
    """An exception as one line: its type and its message with whitespace collapsed."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _rope_types(data: object, path: str = "") -> list[tuple[str, str]]:
    """Every ``rope_type`` in a config dict, with where it sits (``rope_scaling.rope_type``)."""
    found: list[tuple[str, str]] = []
    if isinstance(data, Mapping):
        for key, value in cast("Mapping[object, object]", data).items():
            where = f"{path}.{key}" if path else str(key)
            if key in ("rope_type", "type") and isinstance(value, str) and "rope" in path:
                found.append((where, value))
            else:
                found.extend(_rope_types(value, where))
    return found


def _text_config(config: PretrainedConfig) -> PretrainedConfig:
    """The decoder's own config (a multimodal config's text part)."""
    return config.get_text_config()  # pyright: ignore[reportUnknownMemberType]


def _token_ids(config: PretrainedConfig) -> list[int]:
    ids: list[int] = []
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value: object = getattr(config, name, None)
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(v for v in cast("list[object]", value) if isinstance(v, int))
    return ids


def _head_dims(data: Mapping[str, object], hidden: int, heads: int) -> frozenset[int]:
    """Every head dim the config states (any ``*head_dim`` field, at any depth, e.g.
    Gemma 4's per-layer overrides), or ``hidden // heads`` when it states none."""
    found: set[int] = set()

    def walk(value: object) -> None:
        if isinstance(value, Mapping):
            for key, item in cast("Mapping[object, object]", value).items():
                if isinstance(key, str) and key.endswith("head_dim") and isinstance(item, int):
                    found.add(item)
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in cast("list[object]", value):
                walk(item)

    walk(data)
    return frozenset(found or {hidden // heads})


def _shrunk(config: PretrainedConfig, *, narrow: bool) -> PretrainedConfig:
    """The same layer pattern, heads and head dims at a tiny intermediate size and
    vocabulary; with ``narrow``, a tiny hidden size too (head dims are then set
    explicitly, which not every family reads: the recorder checks)."""
    # Head dims are read from the dict: configs with per-layer overrides (Gemma4)
    # refuse getattr of a per-layer field such as head_dim.
    data = config.to_dict()
    heads: object = getattr(config, "num_attention_heads", None)
    hidden: object = getattr(config, "hidden_size", None)
    if not isinstance(heads, int) or not isinstance(hidden, int) or heads < 1:
        raise UnsupportedModelError(
            f"{type(config).__name__} has no num_attention_heads / hidden_size the probe can read"
        )
    if narrow:
        head_dim = data.get("head_dim")
        data["head_dim"] = head_dim if isinstance(head_dim, int) else hidden // heads
        data["hidden_size"] = heads
    for key in ("intermediate_size", "moe_intermediate_size"):
        if isinstance(data.get(key), int):
            data[key] = _SHRUNK_INTERMEDIATE
    if (
        isinstance(data.get("hidden_size_per_layer_input"), int)
        and data["hidden_size_per_layer_input"]
    ):
        data["hidden_size_per_layer_input"] = _SHRUNK_PER_LAYER_INPUT
    vocab = max([*_token_ids(config), 15]) + 1
    for key in ("vocab_size", "vocab_size_per_layer_input"):
        if isinstance(data.get(key), int):
            data[key] = vocab
    # use_cache stays the config's own: a plain forward reads it (merge_with_config_defaults).
    data.pop("model_type", None)
    try:
        return type(config).from_dict(data)  # pyright: ignore[reportUnknownMemberType]
    except Exception as error:  # transformers' and huggingface_hub's own types
        raise UnsupportedModelError(
            f"cannot shrink {type(config).__name__} for the probe: {_one_line(error)}"
        ) from None


_SUPPORT_FLAGS = {
    AttentionKind.SDPA: "_supports_sdpa",
    AttentionKind.FLEX: "_supports_flex_attn",
    AttentionKind.FLASH: "_supports_flash_attn",
}


def _implementation(
    text: PretrainedConfig, model_class: type[object], requested: str | None
) -> str:
    """The implementation the model would load: ``requested``, else the config's own
    ``attn_implementation``, else transformers' default (``get_correct_attn_
    implementation``: SDPA where the class supports it, eager where it does not)."""
    if requested is not None:
        return requested
    own: object = getattr(text, "_attn_implementation", None)
    if isinstance(own, str) and own:
        attention_kind(own)  # a name transformers would refuse is refused here too
        return own
    return "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"


def _check_supported(text: PretrainedConfig, model_class: type[object], name: str) -> None:
    """Refuse an implementation the model class does not support, with transformers'
    own reason (read by asking it to build the shrunk model on the meta device)."""
    kind = attention_kind(name)
    if kind is AttentionKind.EAGER or getattr(model_class, _SUPPORT_FLAGS[kind], False):
        return
    raise UnsupportedModelError(
        f"{getattr(model_class, '__name__', model_class)} does not support "
        f"attn_implementation={name!r} in transformers {transformers.__version__} "
        f"(model_type {text.model_type!r}){_refusal(text, name)}"
    )


def _refusal(text: PretrainedConfig, name: str) -> str:
    """transformers' own reason for refusing ``name``, read by asking it to build the
    (shrunk, meta-device) model: ``": transformers says ..."``, or empty."""
    try:
        shrunk = _shrunk(text, narrow=True)
        with quiet_transformers(), torch.device("meta"):
            transformers.AutoModel.from_config(  # type: ignore[no-untyped-call]
                shrunk, attn_implementation=name
            )
    except Exception as error:  # any refusal: only its text is wanted
        return f": transformers says {str(error).split('. ')[0]!r}"
    return ""


@contextlib.contextmanager
def quiet_transformers() -> Generator[None]:
    """transformers' log lines about the probe's own shrunk, meta-device model (e.g.
    "Can't set head_dim", kernel fall-backs) say nothing about the caller's model."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.CRITICAL + 1)
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)
