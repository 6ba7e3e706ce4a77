"""PreflightCallback inside transformers' Trainer, against the perturbation ground truth.

A tiny random Llama (config ``use_cache=True``) trains on three short documents that
``DataCollatorWithFlattening`` packs into one row. transformers 5.x's Trainer copies
``TrainingArguments.use_cache`` (False by default) into ``config.use_cache``, so a
default run keeps the documents apart and one given ``use_cache=True`` does not. The
first training forward's arguments are recorded by a second hook, and the real model
is run on them with the first document perturbed (tests/integrations/_ground_truth.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _ground_truth import leaks, tiny_llama

from probewise import CrossDocumentAttentionError
from probewise.integrations.transformers import REPORT_NAME, PreflightCallback
from probewise.throughput.attention.masks import Packing

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
pytest.importorskip("accelerate")

DOCUMENTS = (5, 7, 4)


def dataset() -> datasets.Dataset:
    rows = [
        {"input_ids": [3 + (7 * i + j) % 50 for j in range(n)]} for i, n in enumerate(DOCUMENTS)
    ]
    return datasets.Dataset.from_list(rows)


def arguments(folder: Path, **options: object) -> transformers.TrainingArguments:
    chosen: dict[str, object] = {
        "output_dir": str(folder),
        "per_device_train_batch_size": len(DOCUMENTS),
        "max_steps": 1,
        "learning_rate": 1e-2,
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "logging_strategy": "no",
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "seed": 0,
    }
    return transformers.TrainingArguments(**{**chosen, **options})


@contextmanager
def first_forward(model: torch.nn.Module) -> Iterator[dict[str, object]]:
    """The keyword arguments of the first training forward (filled in when it runs)."""
    seen: dict[str, object] = {}

    def keep(_module: torch.nn.Module, _args: object, kwargs: dict[str, object]) -> None:
        if not seen and torch.is_grad_enabled():
            seen.update(
                {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            )

    handle = model.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def ground_truth(model: torch.nn.Module, forward: dict[str, object]) -> bool:
    model.train()
    batch = {
        k: v for k, v in forward.items() if k in ("input_ids", "position_ids", "attention_mask")
    }
    extra = {k: v for k, v in forward.items() if k == "use_cache"}
    return leaks(model, batch, **extra)


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_a_default_trainer_keeps_packed_documents_apart_and_says_why(tmp_path: Path) -> None:
    model = tiny_llama(use_cache=True)
    callback = PreflightCallback()
    trainer = transformers.Trainer(
        model=model,
        args=arguments(tmp_path),
        train_dataset=dataset(),
        data_collator=transformers.DataCollatorWithFlattening(),
        callbacks=[callback],
    )
    with first_forward(model) as forward:
        trainer.train()
    assert trainer.state.global_step == 1
    assert not ground_truth(model, forward)
    report = callback.report
    assert report is not None
    assert report.scenario.packing is Packing.POSITION_IDS
    assert sorted(report.scenario.documents) == sorted(DOCUMENTS)
    assert not report.kv_cache
    assert report.cross_document_layers() == ()
    saved = json.loads((tmp_path / REPORT_NAME).read_text())
    assert saved["passed"] is True
    assert saved["use_cache"]["value"] is False
    assert "TrainingArguments.use_cache=False" in saved["use_cache"]["from"]
    assert saved["use_cache"]["kv_cache"] is False
    assert saved["scalars"]["probewise/cross_document_layers"] == 0
    assert saved["report"]["scenario"]["documents"] == list(report.scenario.documents)
    logged = [e for e in trainer.state.log_history if "probewise/layers" in e]
    assert logged == [{**saved["scalars"], "step": 0}]


def test_a_trainer_given_use_cache_is_stopped_before_step_one(tmp_path: Path) -> None:
    model = tiny_llama(use_cache=True)
    before = weights(model)
    trainer = transformers.Trainer(
        model=model,
        args=arguments(tmp_path, use_cache=True),
        train_dataset=dataset(),
        data_collator=transformers.DataCollatorWithFlattening(),
        callbacks=[PreflightCallback()],
    )
    with first_forward(model) as forward, pytest.raises(CrossDocumentAttentionError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "TrainingArguments.use_cache=True" in message
    assert "before its first optimizer step" in message
    assert trainer.state.global_step == 0
    after = weights(model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert ground_truth(model, forward)
    saved = json.loads((tmp_path / REPORT_NAME).read_text())
    assert saved["passed"] is False
    assert saved["use_cache"]["kv_cache"] is True
    assert saved["scalars"]["probewise/cross_document_layers"] == 2


def test_warn_logs_the_leak_and_trains_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = tiny_llama(use_cache=True)
    callback = PreflightCallback(on_leak="warn")
    trainer = transformers.Trainer(
        model=model,
        args=arguments(tmp_path, use_cache=True),
        train_dataset=dataset(),
        data_collator=transformers.DataCollatorWithFlattening(),
        callbacks=[callback],
    )
    with caplog.at_level(logging.INFO, logger="probewise"):
        trainer.train()
    assert trainer.state.global_step == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "let packed documents attend to each other" in warnings[0]
    assert callback.report is not None
    assert callback.report.kv_cache


def _equal_rows(features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    width = min(len(f["input_ids"]) for f in features)
    ids = torch.tensor([f["input_ids"][:width] for f in features])
    return {"input_ids": ids, "labels": ids.clone()}


def test_a_run_without_packing_is_unchanged_by_the_callback(tmp_path: Path) -> None:
    trained: list[dict[str, torch.Tensor]] = []
    reports = []
    for callbacks in ([], [PreflightCallback()]):
        model = tiny_llama(use_cache=True)
        trainer = transformers.Trainer(
            model=model,
            args=arguments(tmp_path / str(len(callbacks)), max_steps=2),
            train_dataset=dataset(),
            data_collator=_equal_rows,
            callbacks=callbacks,
        )
        trainer.train()
        trained.append(weights(model))
        reports.extend(c.report for c in callbacks)
    plain, checked = trained
    assert all(torch.equal(plain[k], checked[k]) for k in plain)
    assert any(not torch.equal(plain[k], weights(tiny_llama())[k]) for k in plain)  # it trained
    (report,) = reports
    assert report is not None
    assert report.scenario.packing is Packing.NONE
    assert all(layer.cross_document is None for layer in report.layers)
