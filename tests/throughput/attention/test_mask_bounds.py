"""The mask probe's bounds from the input's size, not its values (issue 30).

A config of 10**6 layers hung (one forward, a layer at a time) and 100,000 took
minutes: past 256 layers the layer pattern is probed once and repeated. A ``--seq`` or
``--batch`` of 10**12, or a ``head_dim`` of 10**9, ended in a MemoryError or a failed
allocation: what the forward will hold is checked against the machine first.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from probewise import InvalidInputError
from probewise.cli import main
from probewise.throughput import MaskScenario, probe_masks

pytest.importorskip("transformers")

# Private: the layer limits (_bounds) are lowered or read, so a small config meets them.
from probewise.throughput.attention import _bounds  # needs transformers


def _bundled(name: str) -> dict[str, object]:
    # The bundled configs' reader, private: it moved from masks into the config stage.
    # Private: the bundled configs are read as raw dicts, to be bent out of range.
    from probewise.throughput.attention._bundled import bundled_config as _resolve_config

    data = _resolve_config(name)
    assert isinstance(data, dict)
    return dict(data)  # pyright: ignore[reportUnknownArgumentType]


def _rows(config: dict[str, object], seq: int = 64) -> list[dict[str, object]]:
    report = probe_masks(config, MaskScenario(seq_len=seq), dtype="bf16")
    return [layer.to_dict() for layer in report.layers]


@pytest.mark.parametrize("name", ["gemma3-27b", "llama4-scout", "gemma2-9b"])
def test_a_repeated_pattern_reports_what_every_layer_probed_reports(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    config = {**_bundled(name), "num_hidden_layers": 40}
    exact = _rows(config)
    monkeypatch.setattr(_bounds, "EXACT_LAYERS", 16)
    monkeypatch.setattr(_bounds, "PROBED_LAYERS", 12)
    cut = _bounds.shortened
    periods: list[int] = []

    def spy(text: object) -> object:
        found = cut(text)  # type: ignore[arg-type]
        periods.append(found[2])
        return found

    monkeypatch.setattr(_bounds, "shortened", spy)
    repeated = _rows(config)
    assert periods  # the pattern was cut and repeated
    assert periods[0] > 0
    assert len(repeated) == len(exact) == 40
    assert repeated == exact


def test_a_hundred_thousand_layers_are_fast() -> None:
    config = {**_bundled("gemma3-27b"), "num_hidden_layers": 100_000}
    start = time.monotonic()
    report = probe_masks(config, MaskScenario(seq_len=64), dtype="bf16")
    assert time.monotonic() - start < 90  # layer by layer: about half an hour
    assert len(report.layers) == 100_000
    assert [layer.index for layer in report.layers[-3:]] == [99_997, 99_998, 99_999]
    types = [layer.layer_type for layer in report.layers]
    assert types[5::6] == ["full_attention"] * len(types[5::6])
    assert types.count("sliding_attention") == 100_000 - len(types[5::6])


def test_a_deep_config_whose_layers_do_not_repeat_is_refused() -> None:
    layers = 300
    config = {
        **_bundled("qwen3-8b"),
        "num_hidden_layers": layers,
        "use_sliding_window": True,
        "sliding_window": 32,
        "max_window_layers": 280,  # sliding from layer 280 on: no period of 256 or less
    }
    with pytest.raises(InvalidInputError, match="does not repeat with a period"):
        probe_masks(config, MaskScenario(seq_len=64), dtype="bf16")
    with pytest.raises(InvalidInputError, match="reports at most"):
        probe_masks(
            {**_bundled("llama3-8b"), "num_hidden_layers": _bounds.MAX_LAYERS + 1},
            MaskScenario(seq_len=64),
            dtype="bf16",
        )


@pytest.mark.parametrize(
    ("fields", "scenario"),
    [
        ({}, {"seq_len": 10**12}),
        ({}, {"batch": 10**12, "seq_len": 64}),
        ({"head_dim": 10**9}, {"seq_len": 64}),
    ],
)
def test_an_allocation_past_the_machine_is_refused_before_it_is_made(
    fields: dict[str, object], scenario: dict[str, int]
) -> None:
    config = {**_bundled("llama3-8b"), **fields}
    start = time.monotonic()
    with pytest.raises(InvalidInputError, match="the probe would hold at least") as info:
        probe_masks(config, MaskScenario(**scenario), dtype="bf16")  # type: ignore[arg-type]
    assert time.monotonic() - start < 60
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("args", [["--seq", str(10**12)], ["--batch", str(10**12)]])
def test_the_cli_refuses_a_huge_scenario_with_exit_2(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["masks", "llama3-8b", *args]) == 2
    err = capsys.readouterr().err
    assert "the probe would hold at least" in err
    assert "internal error" not in err


def test_the_cli_refuses_a_huge_head_dim_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_bundled("llama3-8b"), "head_dim": 10**9}))
    assert main(["masks", str(path), "--seq", "64"]) == 2
    assert "the probe would hold at least" in capsys.readouterr().err
