"""A transformers config for the mask probe: loaded from a file, a dict or an object,
checked, and shrunk in width for the probe's model (see :mod:`._recorder`).

Imports transformers: imported only when :func:`~probewise.throughput.probe_masks` runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import cast

import transformers
from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from probewise._files import read_regular_file
from probewise.errors import InvalidInputError, UnsupportedModelError

__all__ = [
    "build_error",
    "head_dims",
    "load_config",
    "quiet_transformers",
    "shrunk_config",
    "text_config_of",
]

_SHRUNK_INTERMEDIATE = 8
_SHRUNK_PER_LAYER_INPUT = 4


def load_config(config: PretrainedConfig | str | Path | Mapping[str, object]) -> PretrainedConfig:
    """A transformers config from a config object, a ``config.json`` (or its folder), or a dict."""
    if isinstance(config, PretrainedConfig):
        return config
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
    raise InvalidInputError(
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


def build_error(error: Exception, config: PretrainedConfig) -> InvalidInputError:
    """Why transformers could not build the model, naming the config field when it is
    one the probe can tell (an unknown rope type)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    known = {"default", *ROPE_INIT_FUNCTIONS}
    for where, value in _rope_types(config.to_dict()):
        if value not in known:
            return InvalidInputError(
                f"{where} {value!r} is not a rope type transformers {transformers.__version__} "
                f"knows ({', '.join(sorted(known))})"
            )
    return UnsupportedModelError(
        f"transformers {transformers.__version__} could not build {type(config).__name__}'s "
        f"model for the probe: {_one_line(error)}"
    )


def text_config_of(config: PretrainedConfig) -> PretrainedConfig:
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


def head_dims(data: Mapping[str, object], hidden: int, heads: int) -> frozenset[int]:
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


def shrunk_config(config: PretrainedConfig, *, narrow: bool) -> PretrainedConfig:
    """The same layer pattern, heads and head dims at a tiny intermediate size and
    vocabulary; with ``narrow``, a tiny hidden size too (head dims are then set
    explicitly, which not every family reads: :func:`._recorder.record_sdpa_calls` checks)."""
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
