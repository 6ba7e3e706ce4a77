"""The mask probe on a ``Trainer``'s first training batch: :class:`PreflightCallback`.

One added line::

    from probewise.integrations.transformers import PreflightCallback

    trainer = Trainer(model=model, args=args, ..., callbacks=[PreflightCallback()])

It works for any trainer built on transformers' ``Trainer`` (TRL's ``SFTTrainer``
among them). At the start of training it puts a forward pre-hook on the model; the
first training forward hands the hook exactly the keyword arguments the trainer
passes (the collated batch, and whatever the trainer adds: TRL's ``compute_loss``
adds ``use_cache=False``), the hook runs
:func:`~probewise.integrations.torch.probe_forward` on them and removes itself. On a
leak it raises :class:`~probewise.errors.CrossDocumentAttentionError` from inside
that forward, so the run stops before its first optimizer step, weights unchanged.

Importing this module imports transformers (the callback subclasses its
``TrainerCallback``); without it the import is a one-line
:class:`~probewise.errors.MissingExtraError`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, cast

from probewise._extras import Extra, requires
from probewise.errors import (
    ArgumentTypeValueError,
    CrossDocumentAttentionError,
    FastPathLostError,
    InvalidInputError,
)
from probewise.integrations.torch import LOGGER, OnLeak, as_on_leak, probe_forward
from probewise.throughput.attention.masks import MaskReport

with requires(Extra.TORCH, "PreflightCallback"):
    import torch
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

__all__ = ["REPORT_NAME", "PreflightCallback"]

REPORT_NAME = "probewise-preflight.json"
"""The report's file name in ``TrainingArguments.output_dir`` (``probewise-preflight.
rankN.json`` on rank N of a run with several processes)."""


def _fast_path_types(value: bool | Iterable[str] | None) -> tuple[bool, list[str] | None]:
    """``assert_fast_path`` as (assert at all, the layer types or ``None`` for all)."""
    if value is None or value is False:
        return False, None
    if value is True:
        return True, None
    if isinstance(value, str):
        return True, [value]
    try:
        types = list(value)
    except TypeError:
        raise ArgumentTypeValueError(
            f"assert_fast_path must be None, a bool or layer type names, got {type(value).__name__}"
        ) from None
    if not all(isinstance(t, str) for t in cast("list[object]", types)):
        raise InvalidInputError("assert_fast_path must name layer types as strings")
    return True, types


def _use_cache_account(
    report: MaskReport, forward: Mapping[str, object], config_value: object, args: TrainingArguments
) -> dict[str, object]:
    """Which ``use_cache`` the forward ran with, where it came from, and whether a cache was built."""
    if forward.get("use_cache") is not None:
        value, source = forward["use_cache"], "the use_cache argument of the trainer's forward call"
    elif config_value == args.use_cache:
        value = config_value
        source = (
            "config.use_cache, which the Trainer set from "
            f"TrainingArguments.use_cache={args.use_cache}"
        )
    else:
        value, source = config_value, "config.use_cache"
    if report.kv_cache:
        effect = "a KV cache was built, so transformers did not look for packed documents"
    elif value and report.scenario.gradient_checkpointing and report.scenario.training:
        effect = "no KV cache: gradient checkpointing turns use_cache off in training"
    else:
        effect = "no KV cache was built"
    return {"value": value, "from": source, "kv_cache": report.kv_cache, "effect": effect}


class PreflightCallback(TrainerCallback):
    """Check the first training forward of a ``Trainer`` (or a TRL trainer) with the mask probe.

    Args:
        on_leak: ``"raise"`` (the default) stops the run before its first optimizer
            step with :class:`~probewise.errors.CrossDocumentAttentionError` when packed
            documents attend to each other; ``"warn"`` logs the message on the
            ``probewise`` logger and trains on.
        assert_fast_path: ``True`` (every layer) or the layer types (e.g.
            ``["full_attention"]``) that must keep SDPA's fast path; a loss is a
            :class:`~probewise.errors.FastPathLostError`, raised or logged as
            ``on_leak`` says. ``None`` (the default): not checked.
        capability: the CUDA capability the backend predictions are for (9, 0: H100).

    After the check, :attr:`report` holds the :class:`~probewise.MaskReport`, and
    ``args.output_dir`` holds it as JSON (:data:`REPORT_NAME`), with where the
    forward's ``use_cache`` came from. A few numbers (layers, layers whose documents
    cross, layers on the fast path, mask bytes, KV cache) are logged on the
    ``probewise`` logger and added to ``state.log_history``; no batch content is.

    A model or batch the probe does not model (see
    :func:`~probewise.integrations.torch.check_forward`) raises
    :class:`~probewise.errors.UnsupportedModelError` from the first forward, whatever
    ``on_leak`` says: the check was asked for and could not run.
    """

    def __init__(
        self,
        *,
        on_leak: OnLeak | Literal["raise", "warn"] = OnLeak.RAISE,
        assert_fast_path: bool | Iterable[str] | None = None,
        capability: tuple[int, int] = (9, 0),
    ) -> None:
        self._policy = as_on_leak(on_leak)
        self._fast_path, self._fast_path_types = _fast_path_types(assert_fast_path)
        self._capability = capability
        self._handle: torch.utils.hooks.RemovableHandle | None = None
        self._run: tuple[TrainingArguments, TrainerState] | None = None
        self.report: MaskReport | None = None
        """The report of the first training forward (``None`` until it ran)."""

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        """Hook the model's first training forward."""
        model = kwargs.get("model")
        if self.report is not None or self._handle is not None:
            return
        if not isinstance(model, torch.nn.Module):
            raise InvalidInputError("PreflightCallback needs the Trainer's model (none was given)")
        self._run = (args, state)
        self._handle = model.register_forward_pre_hook(self._check, with_kwargs=True)

    def on_train_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        **kwargs: object,
    ) -> None:
        """Remove the hook if no training forward ran."""
        self._remove()

    def _remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _check(
        self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if not (module.training and torch.is_grad_enabled()) or self._run is None:
            return  # an evaluation forward: wait for the first training one
        self._remove()
        batch = dict(kwargs)
        if args:
            batch.setdefault("input_ids", args[0])
        report = probe_forward(module, batch, capability=self._capability)
        self.report = report
        training_args, state = self._run
        config_value: object = getattr(getattr(module, "config", None), "use_cache", None)
        account = _use_cache_account(report, batch, config_value, training_args)
        self._record(report, account, training_args, state)
        self._verdict(report, account)

    def _record(
        self,
        report: MaskReport,
        account: dict[str, object],
        args: TrainingArguments,
        state: TrainerState,
    ) -> None:
        crossing = report.cross_document_layers()
        scalars: dict[str, float] = {
            "probewise/layers": float(len(report.layers)),
            "probewise/cross_document_layers": float(len(crossing)),
            "probewise/fast_path_layers": float(len(report.layers) - len(report.lost_fast_path())),
            "probewise/mask_bytes": float(report.mask_bytes),
            "probewise/kv_cache": float(report.kv_cache),
        }
        document = {
            "passed": not crossing,
            "use_cache": account,
            "scalars": scalars,
            "report": report.to_dict(),
        }
        folder = Path(args.output_dir or ".")
        folder.mkdir(parents=True, exist_ok=True)
        name = REPORT_NAME
        world: object = getattr(args, "world_size", 1)
        if isinstance(world, int) and world > 1:
            rank: object = getattr(args, "process_index", 0)
            name = REPORT_NAME.replace(".json", f".rank{rank}.json")
        text = json.dumps(document, indent=2, allow_nan=False)
        (folder / name).write_text(text + os.linesep, encoding="utf-8")
        state.log_history.append({**scalars, "step": state.global_step})
        LOGGER.info(
            "probewise preflight: %s",
            ", ".join(f"{key.partition('/')[2]}={value:g}" for key, value in scalars.items()),
        )

    def _verdict(self, report: MaskReport, account: dict[str, object]) -> None:
        try:
            if report.cross_document_layers():
                raise CrossDocumentAttentionError(_leak_message(report, account))
            if self._fast_path:
                report.assert_fast_path(layer_types=self._fast_path_types)
        except (CrossDocumentAttentionError, FastPathLostError) as error:
            if self._policy is OnLeak.RAISE:
                raise
            LOGGER.warning("%s", error)


def _leak_message(report: MaskReport, account: dict[str, object]) -> str:
    """The probe's own message, then what fixes it in a trainer."""
    try:
        report.assert_no_cross_document()
    except CrossDocumentAttentionError as error:
        text = str(error)
    else:  # pragma: no cover  # called only when layers cross
        text = "packed documents attend to each other"
    if report.kv_cache:
        text += (
            f" In this trainer use_cache came from {account['from']}: leave "
            "TrainingArguments.use_cache at its default (False), pass use_cache=False in "
            "the forward, or turn gradient checkpointing on."
        )
    return text + " The run was stopped before its first optimizer step."
