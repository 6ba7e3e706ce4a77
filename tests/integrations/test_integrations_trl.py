"""PreflightCallback inside TRL's SFTTrainer with packing, against the ground truth.

TRL packs with best-fit decreasing and goes padding-free: one row, documents marked by
restarting ``position_ids`` plus ``cu_seq_lens_*``. Its ``compute_loss`` passes
``use_cache=False`` and its config turns gradient checkpointing on by default. The
callback must see what TRL really passes, and its verdict must equal what the real
forward does when the first document changes, whatever TRL sets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _ground_truth import VOCAB, tiny_llama
from test_integrations_trainer import first_forward, ground_truth

from probewise.integrations.transformers import REPORT_NAME, PreflightCallback
from probewise.throughput.attention.masks import Packing

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")
trl = pytest.importorskip("trl")
tokenizers = pytest.importorskip("tokenizers")

DOCUMENTS = (5, 7, 4, 6)

# SFTConfig sets gradient_checkpointing, which transformers 5 renamed (TRL's warning).
pytestmark = pytest.mark.filterwarnings(
    "ignore:`gradient_checkpointing` is deprecated:FutureWarning"
)


def tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer built here (no download): TRL asks it for the pad token."""
    words = ["[PAD]", "[BOS]", "[EOS]", *(f"w{i}" for i in range(VOCAB - 3))]
    core = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[PAD]")
    )
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", bos_token="[BOS]", eos_token="[EOS]"
    )


@pytest.mark.parametrize("checkpointing", [True, False], ids=["trl-default", "no-checkpointing"])
def test_sft_packing_verdict_equals_the_ground_truth(tmp_path: Path, checkpointing: bool) -> None:
    rows = [
        {"input_ids": [3 + (7 * i + j) % 50 for j in range(n)]} for i, n in enumerate(DOCUMENTS)
    ]
    model = tiny_llama(use_cache=True)
    callback = PreflightCallback()
    args = trl.SFTConfig(
        output_dir=str(tmp_path),
        packing=True,
        max_length=32,
        per_device_train_batch_size=len(DOCUMENTS),
        max_steps=1,
        gradient_checkpointing=checkpointing,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer(),
        callbacks=[callback],
    )
    with first_forward(model) as forward:
        trainer.train()
    assert trainer.state.global_step == 1
    report = callback.report
    assert report is not None
    assert report.scenario.packing is Packing.POSITION_IDS
    assert sorted(report.scenario.documents) == sorted(DOCUMENTS)
    assert report.scenario.gradient_checkpointing is checkpointing
    assert "cu_seq_lens_q" in forward  # TRL's padding-free keys reached the forward
    assert forward["use_cache"] is False  # TRL's compute_loss passes it
    leaked = ground_truth(model, forward)
    assert bool(report.cross_document_layers()) is leaked
    saved = json.loads((tmp_path / REPORT_NAME).read_text())
    assert saved["passed"] is not leaked
    assert saved["use_cache"]["from"] == "the use_cache argument of the trainer's forward call"
