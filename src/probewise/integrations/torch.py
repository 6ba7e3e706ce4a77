"""Check the forward a training loop really runs: :func:`check_forward`.

One line before a custom loop's first step::

    from probewise.integrations.torch import check_forward

    batch = next(iter(loader))
    check_forward(model, batch)          # raises CrossDocumentAttentionError on a leak
    for batch in loader:
        loss = model(**batch).loss
        ...

It reads the live model (its config, attention implementation, dtype, whether it is
in training mode and has gradient checkpointing on), the forward's keyword arguments
(``use_cache``) and the batch (packing from ``position_ids``, padding from
``attention_mask``, the ``cu_seq_lens_*`` keys), builds the
:class:`~probewise.MaskScenario` they describe and runs the mask probe
(:func:`~probewise.probe_masks`) on the model's config, on CPU. The model's weights are
never read or moved. torch and transformers are imported only when it runs.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, cast

from probewise._extras import Extra, requires
from probewise.errors import (
    ArgumentTypeValueError,
    CrossDocumentAttentionError,
    InvalidInputError,
    UnsupportedModelError,
)
from probewise.integrations._batch import scenario_of_batch
from probewise.throughput.attention.masks import MaskReport, MaskScenario, probe_masks

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

__all__ = ["OnLeak", "check_forward", "forward_scenario", "probe_forward"]

LOGGER = logging.getLogger("probewise")


@enum.unique
class OnLeak(enum.Enum):
    """What :func:`check_forward` does when packed documents attend to each other."""

    RAISE = "raise"
    """Raise :class:`~probewise.errors.CrossDocumentAttentionError` (the default)."""
    WARN = "warn"
    """Log the same message as a warning on the ``probewise`` logger and return the report."""


def as_on_leak(value: OnLeak | Literal["raise", "warn"]) -> OnLeak:
    """``on_leak`` as an :class:`OnLeak` (one line naming the choices otherwise)."""
    try:
        return OnLeak(value)
    except ValueError:
        raise InvalidInputError(f"on_leak must be 'raise' or 'warn', got {value!r}") from None


def unwrap(model: object) -> object:
    """The transformers model inside the wrappers training adds: DDP and FSDP
    (``.module``), ``torch.compile`` (``._orig_mod``), PEFT (``.get_base_model()``)."""
    seen: set[int] = set()
    while id(model) not in seen:
        seen.add(id(model))
        if _config_of(model) is not None and not hasattr(model, "_orig_mod"):
            return model
        for attribute in ("_orig_mod", "module"):
            inner: object = getattr(model, attribute, None)
            if inner is not None:
                model = inner
                break
        else:
            base = getattr(model, "get_base_model", None)
            if callable(base):
                model = base()
    return model


def _config_of(model: object) -> PretrainedConfig | None:
    with requires(Extra.TORCH, "check_forward"):
        from transformers import PretrainedConfig

    config = cast("object", getattr(model, "config", None))
    return config if isinstance(config, PretrainedConfig) else None


def _dtype_of(model: torch.nn.Module) -> torch.dtype:
    """The dtype of the model's first floating-point parameter (its compute dtype)."""
    import torch

    for parameter in model.parameters():
        if parameter.is_floating_point():
            return parameter.dtype
    return torch.get_default_dtype()


def _use_cache(forward_kwargs: Mapping[str, object], batch: Mapping[str, object]) -> bool | None:
    """``use_cache`` as the forward passes it (its keyword, then the batch's key); ``None``
    when neither passes it (the config's own value applies)."""
    for where in (forward_kwargs, batch):
        value = where.get("use_cache")
        if value is not None:
            if not isinstance(value, bool):
                raise ArgumentTypeValueError(
                    f"use_cache must be True or False, got {type(value).__name__}"
                )
            return value
    return None


def _checkpointing(model: torch.nn.Module) -> bool:
    """Whether activation (gradient) checkpointing is on (transformers 5 renamed the flag)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


def _implementation(config: PretrainedConfig) -> str | None:
    name = cast("object", getattr(config, "_attn_implementation", None))
    return name if isinstance(name, str) and name else None


def forward_scenario(
    model: torch.nn.Module, batch: Mapping[str, object], **forward_kwargs: object
) -> MaskScenario:
    """The :class:`~probewise.MaskScenario` that ``model(**batch, **forward_kwargs)``
    runs, read from the live model and the batch (what :func:`check_forward` probes).

    Raises:
        UnsupportedModelError: the model is not a transformers model (no
            ``PretrainedConfig`` found through its wrappers), or the batch marks its
            documents in a way the probe does not model (a 4-D mask, 3-D positions).
        InvalidInputError: the batch has no ``input_ids`` (nor ``inputs_embeds``), or
            its ``cu_seq_lens_*`` disagree with its ``position_ids``.
    """
    with requires(Extra.TORCH, "check_forward"):
        import torch

    inner = unwrap(model)
    config = _config_of(inner)
    if config is None or not isinstance(inner, torch.nn.Module):
        raise UnsupportedModelError(
            f"{type(model).__name__} is not a transformers model (no PretrainedConfig "
            "found through .module, ._orig_mod or .get_base_model())"
        )
    if not isinstance(cast("object", batch), Mapping):
        raise ArgumentTypeValueError(
            f"batch must be a mapping of the forward's keyword arguments, got {type(batch).__name__}"
        )
    return scenario_of_batch(
        {**batch, **forward_kwargs},
        training=inner.training,
        use_cache=_use_cache(forward_kwargs, batch),
        gradient_checkpointing=_checkpointing(inner),
        attn_implementation=_implementation(config),
    )


def check_forward(
    model: torch.nn.Module,
    batch: Mapping[str, object],
    *,
    on_leak: OnLeak | Literal["raise", "warn"] = OnLeak.RAISE,
    capability: tuple[int, int] = (9, 0),
    **forward_kwargs: object,
) -> MaskReport:
    """Probe the forward ``model(**batch, **forward_kwargs)`` will run, before it runs.

    The scenario comes from the live model (its config, ``attn_implementation``,
    training mode, gradient checkpointing and dtype; its weights are untouched), the
    call (``use_cache`` from ``forward_kwargs`` or the batch, else the config's) and
    the batch (see :func:`forward_scenario`); the mask probe then runs transformers'
    own code for that config on CPU (about a second for a small model).

    Two approximations: rows that pack documents differently are probed with the
    layout of the row holding the most documents, at the batch's full shape; rows
    both packed and padded are probed as packed with an attention mask. Whether
    documents leak, and which layers keep the fast path, depend on how the documents
    are marked, not on their lengths; band descriptions and byte counts are those of
    the layout probed.

    Args:
        model: the model as the loop calls it (DDP, FSDP, ``torch.compile`` and PEFT
            wrappers are looked through).
        batch: the forward's keyword arguments as the loop passes them (a collator's
            output); only the shapes, ``position_ids``, ``attention_mask`` and
            ``cu_seq_lens_*`` are read.
        on_leak: ``"raise"`` (the default) or ``"warn"`` (log on the ``probewise``
            logger and return the report).
        capability: the CUDA capability the backend predictions are for (9, 0: H100).
        forward_kwargs: the other keyword arguments of the loop's forward, e.g.
            ``use_cache=False``.

    Raises:
        CrossDocumentAttentionError: packed documents attend to each other; the
            message names the layers and the fix.
        UnsupportedModelError: the model or the batch is one the probe does not model.
        MissingExtraError: torch or transformers is not installed.
    """
    policy = as_on_leak(on_leak)
    report = probe_forward(model, batch, capability=capability, **forward_kwargs)
    try:
        report.assert_no_cross_document()
    except CrossDocumentAttentionError as error:
        if policy is OnLeak.RAISE:
            raise
        LOGGER.warning("%s", error)
    return report


def probe_forward(
    model: torch.nn.Module,
    batch: Mapping[str, object],
    *,
    capability: tuple[int, int] = (9, 0),
    **forward_kwargs: object,
) -> MaskReport:
    """The :class:`~probewise.MaskReport` of the forward ``model(**batch,
    **forward_kwargs)`` will run, with no verdict drawn (:func:`check_forward` draws it).

    Raises:
        UnsupportedModelError: the model or the batch is one the probe does not model.
        MissingExtraError: torch or transformers is not installed.
    """
    scenario = forward_scenario(model, batch, **forward_kwargs)
    inner = cast("torch.nn.Module", unwrap(model))
    config = _config_of(inner)
    assert config is not None  # forward_scenario refused a model without one
    return probe_masks(config, scenario, dtype=_dtype_of(inner), capability=capability)
