"""``probewise arms`` against a local OpenAI-compatible server (tests/_http_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import probewise.responses.arms as responses_arms
from _http_server import CANARY, base_url, serving
from probewise.cli import main

# The server answers at once; the timeout only bounds a lost request. 0.3 s failed on a
# loaded CI machine (8 of 10 prompts timed out), so it is generous and retries stay off.
FAST = ["--timeout", "10", "--retries", "0", "--no-progress", "--max-tokens", "8"]


@pytest.fixture
def server() -> Iterator[object]:
    with serving() as running:
        yield running


def _jsonl(path: Path, prompts: dict[str, str]) -> Path:
    path.write_text(
        "".join(json.dumps({"id": k, "prompt": v}) + "\n" for k, v in prompts.items()),
        encoding="utf-8",
    )
    return path


def _clean(*items: str) -> None:
    for item in items:
        assert CANARY not in item, "canary leaked"  # never show the text itself


def test_json_report_with_two_targets(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    url = base_url(server)
    prompts = _jsonl(
        tmp_path / "p.jsonl",
        {
            "q1": "stop:1",
            "q2": "refuse:1",
            "q3": "deflect:1",
            "q4": "length:1",
            "q5": "empty:1",
            **{f"s{i}": f"stop:s{i}" for i in range(5)},
        },
    )
    status = main(
        ["arms", str(prompts), "--a", f"{url}#model-a", "--b", f"{url}#model-b", "--json", *FAST]
    )
    out, err = capfd.readouterr()
    _clean(out, err)
    assert status == 0
    document = json.loads(out)
    assert document["complete"] is True
    assert document["prompts"] == 10
    assert document["arms"]["a"] == {"url": url, "model": "model-a"}
    assert document["tally_a"] == document["tally_b"]
    assert document["tally_a"]["refused"] == 1
    assert document["tally_a"]["truncated"] == 1
    assert document["control"]["state"] == "both_arms"
    assert [m["p_value"] for m in document["mcnemar"]] == [1.0] * 5
    assert {p["id"]: p["a"] for p in document["pairs"]}["q2"] == "refused"
    assert document["rates"]["a"]["refused"]["trials"] == 9  # over answered
    assert sorted(b["model"] for b in server.bodies) == ["model-a"] * 10 + ["model-b"] * 10  # type: ignore[attr-defined]


def test_table_with_one_target_and_two_models(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text("stop:1\n\nrefuse:2\ne500:3\n", encoding="utf-8")
    status = main(
        ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y", *FAST]
    )
    out, err = capfd.readouterr()
    _clean(out, err)
    assert status == 1  # one prompt per arm got no answer: the run is incomplete
    assert "incomplete: 1 prompts in arm A and 1 in arm B" in err
    assert "McNemar" in out
    assert "Wilson" in out
    assert "control: " in out
    assert "error      all       33.3%" in out
    assert server.attempts["e500:3"] == 2  # type: ignore[attr-defined]  # once per arm


def test_checkpoint_resumes_without_requests(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {str(i): f"stop:{i}" for i in range(6)})
    checkpoint = tmp_path / "run.json"
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    argv += ["--checkpoint", str(checkpoint), "--json", *FAST]
    assert main(argv) == 0
    first = json.loads(capfd.readouterr().out)
    served = server.requests  # type: ignore[attr-defined]
    assert served == 12
    assert main(argv) == 0
    again = json.loads(capfd.readouterr().out)
    assert server.requests == served  # type: ignore[attr-defined]
    assert again == first
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["p.jsonl", "run.a.json", "run.b.json"]
    _clean((tmp_path / "run.a.json").read_text(), (tmp_path / "run.b.json").read_text())


def test_api_key_comes_from_the_environment_and_is_never_shown(
    server: object,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARMS_TEST_KEY", "sk-test-key-998877")
    prompts = _jsonl(tmp_path / "p.jsonl", {"a": "stop:1"})
    url = base_url(server)
    argv = ["arms", str(prompts), "--a", f"{url}#x", "--b", f"{url}#y", "--api-key-env"]
    assert main([*argv, "ARMS_TEST_KEY", *FAST]) == 0
    out, err = capfd.readouterr()
    assert "sk-test-key" not in out + err
    assert server.auth == ["Bearer sk-test-key-998877"] * 2  # type: ignore[attr-defined]
    monkeypatch.delenv("ARMS_TEST_KEY")
    assert main([*argv, "ARMS_TEST_KEY", *FAST]) == 2
    assert "ARMS_TEST_KEY is not set" in capfd.readouterr().err


def test_completions_and_system_prompt_reach_the_server(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {"a": "stop:1"})
    url = base_url(server)
    argv = ["arms", str(prompts), "--a", f"{url}#x", "--b", f"{url}#y", *FAST]
    assert main([*argv, "--completions", "--temperature", "0.7"]) == 0
    assert server.paths == ["/v1/completions"] * 2  # type: ignore[attr-defined]
    assert [b["temperature"] for b in server.bodies] == [0.7, 0.7]  # type: ignore[attr-defined]
    assert main([*argv, "--system-prompt", "be brief"]) == 0
    messages = server.bodies[-1]["messages"]  # type: ignore[attr-defined]
    assert messages[0] == {"role": "system", "content": "be brief"}
    _clean(*capfd.readouterr())


def test_max_response_bytes_caps_each_body(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {"a": "stop:1", "b": "refuse:1"})
    url = base_url(server)
    argv = ["arms", str(prompts), "--a", f"{url}#x", "--b", f"{url}#y", "--json", *FAST]
    assert main([*argv, "--max-response-bytes", "16"]) == 1  # incomplete: Error rows
    out, err = capfd.readouterr()
    _clean(out, err)
    assert "got no usable answer" in err
    document = json.loads(out)
    # every body is longer than 16 bytes: no answer is kept, each prompt is an Error
    assert document["tally_a"]["error"] == document["tally_b"]["error"] == 2
    assert main([*argv]) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    assert json.loads(out)["tally_a"]["error"] == 0
    assert main([*argv, "--max-response-bytes", "0"]) == 2
    assert "max_response_bytes" in capfd.readouterr().err


def test_interrupted_run_exits_1(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(responses_arms, "run_paired", interrupted)  # arms.run looks it up there
    prompts = _jsonl(tmp_path / "p.jsonl", {"a": "stop:1"})
    argv = [
        "arms",
        str(prompts),
        "--a",
        "http://127.0.0.1:9/v1#x",
        "--b",
        "http://127.0.0.1:9/v1#y",
    ]
    assert main([*argv, "--checkpoint", str(tmp_path / "c.json")]) == 1
    out, err = capfd.readouterr()
    assert out == ""
    assert err == "probewise arms: interrupted (rerun the same command to resume)\n"


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("", [], "holds no prompts"),
        ('{"id": "a", "prompt": "x"}\nnot json\n', [], "p.txt:2: not a JSON object"),
        ('{"id": "a", "prompt": "x"}\n[1]\n', [], "p.txt:2: not a JSON object"),
        ('{"id": true, "prompt": "x"}\n', [], 'p.txt:1: "id" must be'),
        ('{"id": "a", "prompt": 3}\n', [], 'p.txt:1: "prompt" must be'),
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', [], "appears twice"),
        ("x\n", ["--b", "http://h/v1"], "arm B: no model"),
        ("x\n", ["--model-b", "m"], "arm B: no server"),
        ("x\n", ["--b", "http://h/v1#m", "--model-b", "n"], "named twice"),
        ("x\n", ["--b", "ftp://h/v1#m"], "base_url must be an http(s) URL"),
        ("x\n", ["--b", "http://h/v1#m", "--max-tokens", "0"], "max_tokens must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    content: str,
    extra: list[str],
    message: str,
) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text(content, encoding="utf-8")
    assert main(["arms", str(prompts), "--a", "http://h/v1#a", *extra]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert message in err


def test_missing_prompt_file_exits_2(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    argv = ["arms", str(tmp_path / "none.txt"), "--a", "http://h/v1#a", "--b", "http://h/v1#b"]
    assert main(argv) == 2
    assert "no such file" in capfd.readouterr().err


@pytest.mark.parametrize("which", ["prompts", "calibration"])
@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_device_or_fifo_input_is_refused_at_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], which: str, kind: str
) -> None:
    import os
    import time

    special = "/dev/zero"
    if kind == "fifo":
        special = str(tmp_path / "fifo")
        os.mkfifo(special)  # no writer: reading it would block forever
    prompts = str(_jsonl(tmp_path / "p.jsonl", {"1": "stop:1"}))
    argv = ["arms", special if which == "prompts" else prompts, "--url", "http://h/v1"]
    argv += ["--model-a", "a", "--model-b", "b"]
    if which == "calibration":
        argv += ["--calibration", special]
    start = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - start < 5
    err = capfd.readouterr().err
    assert "not a regular file" in err
    assert err.count("\n") == 1


def _calibration_file(path: Path, *, good: bool) -> Path:
    from probewise import Calibration, Complied, Deflected, HumanLabel, Refused

    pairs: list[tuple[Complied | Deflected | Refused, HumanLabel]]
    if good:  # misses a quarter of the declines, flags one answer in ten
        pairs = [(Refused(), HumanLabel.DECLINED)] * 30 + [(Complied(), HumanLabel.DECLINED)] * 10
        pairs += [(Complied(), HumanLabel.COMPLIED)] * 36 + [(Deflected(), HumanLabel.COMPLIED)] * 4
    else:  # the rubric's verdict says nothing about the label
        pairs = [(Refused(), label) for label in (HumanLabel.DECLINED, HumanLabel.COMPLIED)] * 5
        pairs += [(Complied(), label) for label in (HumanLabel.DECLINED, HumanLabel.COMPLIED)] * 5
    path.write_text(json.dumps(Calibration.of(pairs).to_dict()), encoding="utf-8")
    return path


def test_calibration_adds_corrected_rates(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from probewise import ArmTally, Calibration

    prompts = _jsonl(
        tmp_path / "p.jsonl",
        {
            "r1": "refuse:1",
            "r2": "refuse:2",
            "d1": "deflect:1",
            **{f"s{i}": f"stop:{i}" for i in range(7)},
        },
    )
    calibration_file = _calibration_file(tmp_path / "cal.json", good=True)
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    assert main([*argv, "--calibration", str(calibration_file), "--json", *FAST]) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    document = json.loads(out)
    calibration = Calibration.from_dict(json.loads(calibration_file.read_text(encoding="utf-8")))
    tally_a = ArmTally.from_dict(document["tally_a"])
    tally_b = ArmTally.from_dict(document["tally_b"])
    assert document["corrected"] == json.loads(
        json.dumps(calibration.compare(tally_a, tally_b).to_dict())
    )
    assert (
        document["corrected"]["a"]["estimate"] > document["corrected"]["a"]["observed"]["estimate"]
    )
    assert main([*argv, "--calibration", str(calibration_file), *FAST]) == 0
    out, err = capfd.readouterr()
    _clean(out, err)
    assert "calibrated: corrected declined rates: A " in out


def _refused_calibration(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str], path: Path
) -> str:
    """probewise arms with ``path`` as --calibration: exit 2, one line, no request."""
    prompts = _jsonl(tmp_path / "p.jsonl", {"s1": "stop:1"})
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    assert main([*argv, "--calibration", str(path), *FAST]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert server.requests == 0  # type: ignore[attr-defined]
    return err


def test_bad_calibration_exits_2_before_any_request(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {"s1": "stop:1"})
    broken = tmp_path / "broken.json"
    broken.write_text('{"matrix": 3}', encoding="utf-8")
    assert "broken.json" in _refused_calibration(server, tmp_path, capfd, broken)
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    chance = _calibration_file(tmp_path / "chance.json", good=False)
    assert main([*argv, "--calibration", str(chance), *FAST]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert "chance" in err


@pytest.mark.parametrize("count", [10**400, 2**53 + 1])
def test_calibration_counts_past_float_range_exit_2_before_any_request(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str], count: int
) -> None:
    # They ended the run with exit 3 once every request had been sent (issue 30).
    path = _calibration_file(tmp_path / "huge.json", good=True)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["matrix"]["refused"]["declined"] = count
    path.write_text(json.dumps(data), encoding="utf-8")
    assert "at most 2**53" in _refused_calibration(server, tmp_path, capfd, path)


def test_a_checkpoint_of_another_model_or_prompts_exits_2_without_requests(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {str(i): f"stop:{i}" for i in range(4)})
    checkpoint = tmp_path / "run.json"
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-b", "y"]
    argv += ["--checkpoint", str(checkpoint), "--json", *FAST]
    assert main([*argv, "--model-a", "x"]) == 0
    capfd.readouterr()
    served = server.requests  # type: ignore[attr-defined]
    assert main([*argv, "--model-a", "other"]) == 2
    out, err = capfd.readouterr()
    assert out == ""
    assert 'model was "x", now "other"' in err
    assert "--resume-anyway" in err
    assert err.count("\n") == 1
    assert server.requests == served  # type: ignore[attr-defined]
    _jsonl(prompts, {str(i): f"stop:rewritten{i}" for i in range(4)})
    assert main([*argv, "--model-a", "x"]) == 2
    assert "4 prompts' texts differ" in capfd.readouterr().err
    assert main([*argv, "--model-a", "x", "--resume-anyway"]) == 0
    capfd.readouterr()
    assert server.requests == served  # type: ignore[attr-defined]


@pytest.mark.parametrize("checkpoint", ["/dev/null", "/proc/self/status"])
def test_a_checkpoint_that_cannot_be_one_exits_2(
    server: object, tmp_path: Path, capfd: pytest.CaptureFixture[str], checkpoint: str
) -> None:
    prompts = _jsonl(tmp_path / "p.jsonl", {"1": "stop:1"})
    argv = ["arms", str(prompts), "--url", base_url(server), "--model-a", "x", "--model-b", "y"]
    assert main([*argv, "--checkpoint", checkpoint, *FAST]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert checkpoint in err
    assert not Path(checkpoint + ".a.json").exists()


def test_timeout_bounds_each_attempt_against_a_dribbling_server(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import time

    from _hostile_server import hostile, hostile_url

    with hostile() as slow:
        slow.dribble_seconds = 0.1  # every read comes well within --timeout
        prompts = _jsonl(tmp_path / "p.jsonl", {"1": "dribble:1", "2": "interim:2"})
        argv = ["arms", str(prompts), "--url", hostile_url(slow), "--model-a", "a"]
        argv += ["--model-b", "b", "--timeout", "0.5", "--retries", "0", "--no-progress"]
        start = time.monotonic()
        assert main(argv) == 1  # every prompt timed out: the Error bucket
        elapsed = time.monotonic() - start
    out, err = capfd.readouterr()
    assert "2 prompts in arm A and 2 in arm B" in err
    assert elapsed < 6.0, f"{elapsed:.1f} s"
    assert "zq-canary" not in out + err


@pytest.mark.parametrize("stop", [True, False])
def test_arms_stops_replies_once_decided(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], stop: bool
) -> None:
    """On by default: each reply is streamed and closed once decided; the report
    counts decided replies and tokens per prompt. --no-stop-when-decided reads whole."""
    from _hostile_server import hostile, hostile_url

    with hostile() as hostile_server:
        hostile_server.slow_seconds = 0.5
        url = hostile_url(hostile_server)
        prompts = _jsonl(tmp_path / "p.jsonl", {"q1": "sse:1", "q2": "sselong:1"})
        flag = [] if stop else ["--no-stop-when-decided"]
        status = main(["arms", str(prompts), "--a", f"{url}#a", "--b", f"{url}#b", *flag])
    out, err = capfd.readouterr()
    _clean(out, err)
    if stop:
        assert status == 0
        assert "decided    all       1/2" in out
        assert "tokens     /prompt" in out
        assert "(2 prompts)" in out
    else:
        # Not streamed: the server answers with one JSON body each (the sse behaviours
        # stream only when asked to), so nothing is decided and no tokens are counted.
        assert status == 0
        assert "decided    all       0/2" in out
        assert "not counted" in out
