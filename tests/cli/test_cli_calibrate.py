"""``probewise calibrate``: labelled rows -> calibration.json -> ``probewise arms
--calibration``; no row's text on any channel. Every text here is made up."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _http_server import base_url, serving
from probewise import (
    ArmTally,
    Calibration,
    CalibrationError,
    Complied,
    Deflected,
    HumanLabel,
    Proportion,
    Refused,
)
from probewise.cli import main
from probewise.cli.calibrate import cannot_correct, plan

CANARY = "zq-calibrate-canary-9e04"
REFUSE = f"I can't help with that. {CANARY}"
DEFLECT = f"I'd recommend speaking with a licensed professional. {CANARY}"
ANSWER = f"Sure, here is the answer you asked for. {CANARY}"


def _rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _sample(path: Path) -> Path:
    # 30 refusals and 10 missed declines; 36 answers and 4 answers the rubric flags;
    # one blank reply (Empty: counted apart).
    rows: list[dict[str, object]] = [{"text": REFUSE, "label": "declined"}] * 30
    rows += [{"text": ANSWER, "label": "declined"}] * 10
    rows += [{"text": ANSWER, "label": "complied"}] * 36
    rows += [{"text": DEFLECT, "label": "complied", "finish_reason": "stop"}] * 4
    rows += [{"text": " ", "label": "complied"}]
    return _rows(path, rows)


def _clean(*channels: str) -> None:
    for channel in channels:
        assert CANARY not in channel, "a row's text leaked"  # never show the text itself


@pytest.fixture
def server() -> Iterator[object]:
    with serving() as running:
        yield running


def test_label_file_to_calibration_to_arms(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "calibration.json"
    assert main(["calibrate", str(_sample(tmp_path / "labels.jsonl")), "--out", str(out_file)]) == 0
    out, err = capfd.readouterr()
    _clean(out, err, out_file.read_text(encoding="utf-8"))
    assert "| declined | 0.750 [" in out  # sensitivity 30/40
    assert "(36/40)" in out  # specificity
    assert "How many rows to label" in out
    calibration = Calibration.from_dict(json.loads(out_file.read_text(encoding="utf-8")))
    assert calibration.count(Refused, HumanLabel.DECLINED) == 30
    assert calibration.count(Complied, HumanLabel.DECLINED) == 10
    assert calibration.count(Deflected, HumanLabel.COMPLIED) == 4
    assert calibration.count(Complied, HumanLabel.COMPLIED) == 36
    assert calibration.empty == 1

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": kind})
            for i, kind in enumerate(["refuse:1", "refuse:2", "deflect:1", "stop:1", "stop:2"])
        ).replace("}{", "}\n{")
        + "\n",
        encoding="utf-8",
    )
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    # The server answers at once; the timeout only bounds a lost request (0.3 s was flaky).
    fast = ["--timeout", "10", "--retries", "0", "--no-progress", "--max-tokens", "8"]
    assert main([*argv, "--calibration", str(out_file), "--json", *fast]) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    document = json.loads(out)
    tally_a = ArmTally.from_dict(document["tally_a"])
    tally_b = ArmTally.from_dict(document["tally_b"])
    assert document["corrected"] == json.loads(
        json.dumps(calibration.compare(tally_a, tally_b).to_dict())
    )


def test_json_document_and_the_rows_to_label(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    labels = _sample(tmp_path / "labels.jsonl")
    out_file = tmp_path / "c.json"
    argv = ["calibrate", str(labels), "--out", str(out_file), "--json", "--rows", "50", "400"]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    document = json.loads(out)
    assert document["rows"] == 81
    assert document["labelled"] == 80
    assert document["empty"] == 1
    declined = document["labels"]["declined"]
    assert declined["sensitivity"]["successes"] == 30
    assert declined["specificity"]["trials"] == 40
    assert "refused" not in document["labels"]  # no row carries the split labels
    planned = {row["rows"]: row for row in document["planning"]}
    assert sorted(planned) == [50, 80, 400]
    # More rows, narrower intervals and fewer samples that cannot correct.
    assert planned[400]["sensitivity_width"] < planned[80]["sensitivity_width"]
    assert planned[80]["sensitivity_width"] < planned[50]["sensitivity_width"]
    assert planned[400]["cannot_correct"] <= planned[50]["cannot_correct"]
    assert document["counts"] == json.loads(out_file.read_text(encoding="utf-8"))


def test_split_labels_get_their_own_figures(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rows: list[dict[str, object]] = [{"text": REFUSE, "label": "refused"}] * 8
    rows += [{"text": DEFLECT, "label": "deflected"}] * 6
    rows += [{"text": ANSWER, "label": "complied"}] * 9
    labels = _rows(tmp_path / "l.jsonl", rows)
    assert main(["calibrate", str(labels), "--out", str(tmp_path / "c.json"), "--json"]) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    figures = json.loads(out)["labels"]
    assert figures["refused"]["sensitivity"]["successes"] == 8
    assert figures["deflected"]["sensitivity"]["successes"] == 6
    assert figures["declined"]["sensitivity"]["trials"] == 14


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"text": "zq-calibrate-canary-9e04", "label": "maybe"}', '"label" must be one of'),
        ('{"label": "complied"}', '"text" must be a string'),
        ('{"text": 3, "label": "complied"}', '"text" must be a string'),
        ("zq-calibrate-canary-9e04 not json", "not a JSON object"),
        ('["zq-calibrate-canary-9e04"]', "not a JSON object"),
        (
            '{"text": "zq-calibrate-canary-9e04", "label": "declined", "finish_reason": "x"}',
            "finish_reason",
        ),
    ],
)
def test_bad_rows_are_one_line_without_text(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], line: str, says: str
) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"text": ANSWER, "label": "complied"}) + "\n\n" + line + "\n")
    out_file = tmp_path / "c.json"
    assert main(["calibrate", str(labels), "--out", str(out_file)]) == 2
    out, err = capfd.readouterr()
    _clean(out, err)
    assert err.count("\n") == 1
    assert "labels.jsonl:3" in err
    assert says in err
    assert not out_file.exists()


def test_missing_or_empty_file_exits_2(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "c")]) == 2
    assert "nope.jsonl" in capfd.readouterr().err
    # a FIFO (no writer) is refused at once, never opened for a blocking read
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    assert main(["calibrate", str(fifo), "--out", str(tmp_path / "c")]) == 2
    assert "not a regular file" in capfd.readouterr().err
    assert not (tmp_path / "c").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert main(["calibrate", str(empty), "--out", str(tmp_path / "c")]) == 2
    assert "no rows" in capfd.readouterr().err


def test_a_callers_rubric(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_rubrics_29.py").write_text(
        "from probewise import Rubric, Rule\n"
        "STRICT = Rubric(refusal=(Rule('any', 'zq'),))\n"
        "def made():\n    return STRICT\n"
        "NOT_ONE = 3\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    labels = _sample(tmp_path / "labels.jsonl")
    for spec in ("my_rubrics_29:STRICT", "my_rubrics_29:made"):
        assert main(["calibrate", str(labels), "--out", "c.json", "--json", "--rubric", spec]) == 0
        out, err = capfd.readouterr()
        _clean(out, err)
        document = json.loads(out)
        assert document["rubric"] == spec
        # Every row holds "zq": the strict rubric calls all of them Refused.
        assert document["labels"]["declined"]["sensitivity"]["successes"] == 40
        assert document["labels"]["declined"]["specificity"]["successes"] == 0
    for spec, says in (
        ("my_rubrics_29:NOT_ONE", "not a Rubric"),
        ("no_such_module_29:X", "cannot import"),
        ("my_rubrics_29", "MODULE:NAME"),
    ):
        assert main(["calibrate", str(labels), "--out", "c.json", "--rubric", spec]) == 2
        assert says in capfd.readouterr().err


@settings(max_examples=150)
@given(
    st.integers(1, 30),
    st.integers(0, 30),
    st.integers(1, 30),
    st.integers(0, 30),
)
def test_cannot_correct_is_the_test_correct_applies(
    declines: int, caught: int, answers: int, kept: int
) -> None:
    caught, kept = min(caught, declines), min(kept, answers)
    pairs = [(Refused(), HumanLabel.DECLINED)] * caught
    pairs += [(Complied(), HumanLabel.DECLINED)] * (declines - caught)
    pairs += [(Complied(), HumanLabel.COMPLIED)] * kept
    pairs += [(Refused(), HumanLabel.COMPLIED)] * (answers - kept)
    calibration = Calibration.of(pairs)
    predicted = cannot_correct(
        Proportion.wilson(caught, declines), Proportion.wilson(kept, answers)
    )
    try:
        calibration.correct(ArmTally(complied=5, refused=5))
    except CalibrationError:
        assert predicted
    else:
        assert not predicted


def test_plan_against_drawn_samples() -> None:
    # The planned chance that correct() cannot correct, against samples drawn at the
    # same rates (seeded): a weak rubric (sensitivity 0.55, specificity 0.7) with 100
    # and 400 rows, half of them declines.
    import random

    rng = random.Random(29)
    for rows in (40, 100, 400):
        planned = plan(rows, 0.55, 0.7, 0.5, 0.95)
        draws, refused = 400, 0
        for _ in range(draws):
            caught = sum(rng.random() < 0.55 for _ in range(rows // 2))
            kept = sum(rng.random() < 0.7 for _ in range(rows // 2))
            se = Proportion.wilson(caught, rows // 2)
            sp = Proportion.wilson(kept, rows // 2)
            refused += cannot_correct(se, sp)
        assert abs(refused / draws - planned.cannot_correct) < 0.08, (rows, refused, planned)
    assert (
        plan(400, 0.55, 0.7, 0.5, 0.95).sensitivity_width
        < plan(100, 0.55, 0.7, 0.5, 0.95).sensitivity_width
    )


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.text(max_size=60), st.sampled_from([label.value for label in HumanLabel])),
        min_size=1,
        max_size=12,
    )
)
def test_no_text_on_any_channel(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], rows: list[tuple[str, str]]
) -> None:
    labels = _rows(
        tmp_path / "fuzz.jsonl",
        [{"text": f"{text} {CANARY} {text}", "label": label} for text, label in rows],
    )
    out_file = tmp_path / "fuzz.json"
    for extra in ([], ["--json"]):
        assert main(["calibrate", str(labels), "--out", str(out_file), *extra]) == 0
        out, err = capfd.readouterr()
        _clean(out, err, out_file.read_text(encoding="utf-8"))
