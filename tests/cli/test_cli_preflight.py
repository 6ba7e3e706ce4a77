"""``probewise preflight`` and ``probewise masks``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from probewise.cli import main

# Private: --capability's parser is checked form by form, without a probe run for each.
from probewise.cli._probe import parse_capability
from probewise.cli.preflight import synthetic_lengths
from probewise.errors import InvalidInputError


def test_preflight_with_no_arguments_passes_on_the_embedded_defaults() -> None:
    # A fresh process, as the README's main command runs it.
    done = subprocess.run(
        [sys.executable, "-m", "probewise.cli", "preflight"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "gemma3-27b (Gemma3TextModel, sdpa), batch 2 x 8192 tokens" in out
    assert "WARN  attention: SDPA fast path" in out
    assert "10 of 62 layers keep it" in out  # the full-attention layers
    assert "PASS  data: bucket sweep" in out
    assert out.rstrip().endswith("passed (warnings are worth a look, not errors)")


def test_preflight_packed_with_an_all_ones_mask_fails_naming_the_layers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["preflight", "--seq", "512", "--batch", "1", "--packed", "all-ones-mask"])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  attention: packed documents kept apart" in out
    assert "layers 0-61 let documents attend to each other" in out
    assert "Loops: an all-ones attention mask stops transformers looking" in out
    assert out.rstrip().endswith("FAILED")
    # A Trainer turns the cache off, but the mask still hides the packing.
    argv = ["preflight", "--seq", "64", "--batch", "1", "--packed", "all-ones-mask"]
    assert main([*argv, "--loop", "trainer"]) == 1
    out = capsys.readouterr().out
    assert "forward: a Trainer's (TrainingArguments.use_cache=False" in out
    assert "Loops: an all-ones attention mask stops transformers looking" in out


def test_preflight_packed_with_the_configs_use_cache_fails_naming_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Gemma 3's config has use_cache true (the default): a plain training forward
    # builds a cache, and transformers then skips packed-sequence detection.
    status = main(["preflight", "--seq", "512", "--batch", "1", "--packed"])
    out = capsys.readouterr().out
    assert status == 1
    assert "forward: training, use_cache from the config" in out
    assert "FAIL  attention: packed documents kept apart layers 0-61" in out
    assert "config.use_cache=False, pass use_cache=False in the forward" in out
    assert "gradient checkpointing" in out
    assert out.rstrip().endswith("FAILED")


def test_preflight_tells_the_loops_apart(capsys: pytest.CaptureFixture[str]) -> None:
    # A default Trainer copies TrainingArguments.use_cache=False into the config, so
    # the packed run that fails as a plain loop passes as a Trainer; a Trainer given
    # use_cache=True fails, naming the TrainingArguments fix.
    argv = ["preflight", "--seq", "64", "--batch", "1", "--packed", "--json"]
    assert main([*argv, "--loop", "plain"]) == 1
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--loop", "trainer"]) == 0
    trainer = json.loads(capsys.readouterr().out)
    assert main([*argv, "--loop", "trainer", "--use-cache", "on"]) == 1
    given = json.loads(capsys.readouterr().out)
    assert [d["loop"] for d in (plain, trainer, given)] == ["plain", "trainer", "trainer"]
    assert [d["masks"]["scenario"]["use_cache"] for d in (plain, trainer, given)] == [
        None,
        False,
        True,
    ]
    assert [d["masks"]["kv_cache"] for d in (plain, trainer, given)] == [True, False, True]
    packing = [d["checks"][0] for d in (plain, trainer, given)]
    assert [c["status"] for c in packing] == ["fail", "pass", "fail"]
    assert "a Trainer with the default TrainingArguments.use_cache=False" in packing[0]["detail"]
    assert "leave TrainingArguments.use_cache at its default (False)" in packing[2]["detail"]
    assert main(["preflight", "--seq", "64", "--batch", "1", "--packed", "--loop", "trainer"]) == 0
    out = capsys.readouterr().out
    assert "forward: a Trainer's (TrainingArguments.use_cache=False copied into the config)" in out


@pytest.mark.parametrize(
    "flags", [["--use-cache", "off"], ["--gradient-checkpointing"]], ids=["off", "checkpointing"]
)
def test_preflight_packed_without_a_cache_keeps_documents_apart(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["preflight", "--seq", "512", "--batch", "1", "--packed", "--json", *flags]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["attention: packed documents kept apart"]["status"] == "pass"
    assert checks["attention: SDPA fast path"]["status"] == "warn"  # block masks cost flash
    assert document["passed"] is True
    scenario = document["masks"]["scenario"]
    assert scenario["documents"] == [128, 128, 128, 128]
    assert scenario["use_cache"] is (False if flags[0] == "--use-cache" else None)
    assert scenario["gradient_checkpointing"] is (flags[0] == "--gradient-checkpointing")
    assert document["masks"]["kv_cache"] is False
    assert len(document["masks"]["layers"]) == 62


def test_gradient_checkpointing_keeps_the_cache_in_an_inference_forward(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["masks", "llama3-8b", "--seq", "64", "--packed", "--gradient-checkpointing"]
    assert main([*argv, "--inference", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["kv_cache"] is True
    assert document["failure"].startswith("CrossDocumentAttentionError: 32 of 32 layers")
    assert main([*argv, "--use-cache", "on"]) == 0  # training: transformers turns it off
    out = capsys.readouterr().out
    assert "forward: training, use_cache=True, gradient checkpointing on, no KV cache" in out


def test_preflight_fails_when_a_mask_is_plain_causal_for_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["preflight", "--seq", "1024", "--batch", "1"])  # == Gemma 3's window
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  attention: SDPA fast path" in out
    assert "identical to plain causal (lost for nothing)" in out


def test_preflight_expect_fast_and_lengths_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("\n".join(str(n) for n in [100, 200, 300, 4000, 9000] * 20) + "\n")
    argv = ["preflight", "--lengths", str(lengths), "--seq", "2048", "--batch", "4"]
    assert main([*argv, "--expect-fast", "full_attention"]) == 0
    out = capsys.readouterr().out
    assert "40 of 100 sequences (40.0%) are longer than --seq 2048" in out
    assert main([*argv, "--expect-fast", "sliding_attention"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  attention: SDPA fast path" in out
    assert "all 52 sliding_attention layers" in out
    assert main([*argv, "--expect-fast", "no_such_type"]) == 2
    assert "this model has layer types" in capsys.readouterr().err


def test_masks_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["masks", "gemma4", "--seq", "256"]) == 0
    out = capsys.readouterr().out
    assert "Gemma4TextModel (gemma4_text), batch 1 x 256 tokens" in out
    assert "flash: head_dim 512 > 256" in out
    assert main(["masks", "gemma4", "--seq", "256", "--assert-fast", "full_attention"]) == 1
    assert "FastPathLostError: 5 of 30 layers" in capsys.readouterr().out
    assert (
        main(["masks", "llama3-8b", "--seq", "128", "--padding", "right", "--batch", "2", "--json"])
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    layer = document["layers"][0]
    assert layer["mask"] == "boolean"
    assert layer["band"]["kind"] == "causal"
    assert layer["band"]["padding_columns"] == [32, 64]
    assert layer["gqa"] == "repeated"
    assert document["failure"] is None


def test_masks_list_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["masks", "--list"]) == 0
    assert "gemma3-27b" in capsys.readouterr().out.split()
    assert main(["masks", "gemma2-9b", "--seq", "64", "--attn-implementation", "sdpa"]) == 2
    assert "does not support attn_implementation='sdpa'" in capsys.readouterr().err
    assert main(["masks"]) == 2
    assert main(["masks", "llama3-8b", "--documents", "4,4"]) == 2
    assert "--documents needs --packed" in capsys.readouterr().err
    assert main(["masks", "llama3-8b", "--padding", "right", "--packed"]) == 2


@pytest.mark.parametrize(
    ("text", "expected"), [("9.0", (9, 0)), ("8.6", (8, 6)), ("sm90", (9, 0)), ("sm_100", (10, 0))]
)
def test_parse_capability(text: str, expected: tuple[int, int]) -> None:
    assert parse_capability(text) == expected


def test_parse_capability_rejects() -> None:
    with pytest.raises(InvalidInputError):
        parse_capability("hopper")


def test_synthetic_lengths_are_fixed() -> None:
    a, b = synthetic_lengths(), synthetic_lengths()
    assert a.shape == (20_000,)
    assert (a == b).all()
    assert a.min() >= 16
    assert a.max() <= 32_768


def test_a_bad_config_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.resources

    resource = (
        importlib.resources.files("probewise.throughput.attention") / "configs" / "llama3-8b.json"
    )
    data = json.loads(resource.read_text(encoding="utf-8"))
    data.update(num_hidden_layers=2, layer_types=["full_attention", "bogus"])
    config = tmp_path / "config.json"
    config.write_text(json.dumps(data))
    for argv in (["masks", str(config)], ["preflight", "--config", str(config)]):
        assert main([*argv, "--seq", "32"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "layer_types" in err


def test_preflight_tokenizer_folder_missing_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"text": "a b c"}\n')
    missing = tmp_path / "no-such-tokenizer"
    assert main(["preflight", "--lengths", str(texts), "--tokenizer", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--tokenizer: no such folder: {missing}" in err
    assert main(["preflight", "--tokenizer", str(tmp_path)]) == 2
    assert "--tokenizer needs --lengths" in capsys.readouterr().err


def test_masks_shows_progress_on_stderr_past_the_delay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Private: the progress delay is set to 0, so a small config shows the progress line.
    from probewise.throughput.attention import _recorder as _mask_recorder

    # A config with thousands of layers passes the 2 s delay; here the delay is 0.
    monkeypatch.setattr(_mask_recorder, "PROGRESS_DELAY_S", 0.0)
    assert main(["masks", "llama3-8b", "--seq", "32", "--json"]) == 0
    captured = capsys.readouterr()
    assert "mask probe (llama)" in captured.err
    assert "/32 [" in captured.err
    assert json.loads(captured.out)["model_type"] == "llama"  # stdout stays clean


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_preflight_lengths_that_are_no_regular_file_are_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], special: str
) -> None:
    import os

    if special == "fifo":
        special = str(tmp_path / "fifo")
        os.mkfifo(special)
    elif special == "folder":
        special = str(tmp_path)
    assert main(["preflight", "--lengths", special]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err
    assert "no such file" not in err
    assert main(["preflight", "--lengths", str(tmp_path / "missing.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_masks_attn_implementation_one_and_all(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["masks", "gemma2-9b", "--seq", "64", "--packed", "--use-cache", "off"]
    assert main([*base, "--attn-implementation", "eager", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["attn_implementation"] == "eager"
    assert document["scenario"]["attn_implementation"] == "eager"
    assert {layer["kernel"]["implementation"] for layer in document["layers"]} == {"eager"}
    assert all(
        layer["backend"] is None and layer["rulings"] is None for layer in document["layers"]
    )
    assert main([*base, "--batch", "2", "--attn-implementation", "all", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["implementations"]
    assert list(rows) == [
        "eager",
        "sdpa",
        "flex_attention",
        "flash_attention_2",
        "flash_attention_3",
    ]
    assert "does not support attn_implementation='sdpa'" in rows["sdpa"]["refused"]
    assert rows["eager"]["cross_document_layers"] == 0
    assert rows["flex_attention"]["dense_mask_layers"] == 0
    # two packed rows: FlashAttention does not look for packing, documents leak
    assert rows["flash_attention_2"]["cross_document_layers"] == rows["eager"]["layers"] == 42
    assert rows["flash_attention_2"]["predicted"]
    assert document["failure"] is None  # the main report (eager) keeps them apart
    assert main([*base, "--attn-implementation", "all"]) == 0
    out = capsys.readouterr().out
    assert "flash_attention_3  kept apart" in out
    assert "sdpa               refused: " in out
    assert main([*base, "--attn-implementation", "flash_attention_9x"]) == 2
    assert "attn_implementation must be one of" in capsys.readouterr().err


def test_preflight_under_flash_with_two_packed_rows_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "preflight", "--config", "llama3-8b", "--seq", "256", "--batch", "2", "--packed",
        "--use-cache", "off", "--attn-implementation", "flash_attention_2",
    ]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "(LlamaModel, flash_attention_2)" in out
    assert "FAIL  attention: packed documents kept apart" in out
    assert main([*argv[:-1], "flex_attention", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    names = [check["name"] for check in document["checks"]]
    assert "attention: fused kernel (flex_attention)" in names
