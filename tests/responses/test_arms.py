"""run_arm / run_paired: every prompt counted, generator failures bucketed, no text kept."""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
import warnings
from collections.abc import Hashable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probewise import ArmTally, Completion, ControlState, FinishReason, Rubric, classify

# Private: counting what a checkpoint holds needs the journal's reader; run_arm only resumes.
from probewise.responses import _journal
from probewise.responses.arms import run_arm, run_paired
from probewise.responses.stats import OutcomeBucket

CANARY = "zq-arm-canary-41c2"

# Made-up completions per prompt id, for two arms: arm B deflects where A complies.
ARM_A = {
    "p0": f"Here is the answer you asked for. {CANARY}",
    "p1": f"I can't help with that. {CANARY}",
    "p2": f"Sure: step one, then step two. {CANARY}",
    "p3": "",
    "p4": f"Here is a summary of the topic. {CANARY}",
}
ARM_B = {
    "p0": f"I'd recommend speaking with a professional about this instead. {CANARY}",
    "p1": f"I can't help with that. {CANARY}",
    "p2": f"I'd suggest talking to a qualified expert instead. {CANARY}",
    "p3": f"Here is the answer. {CANARY}",
    "p4": f"I'd recommend consulting a specialist instead. {CANARY}",
}
PROMPTS: dict[Hashable, str] = {k: f"prompt {k}" for k in ARM_A}


def saved(path: Path) -> int:
    """Prompts the checkpoint at ``path`` holds."""
    return len(_journal.read(path, Rubric.default()))


class GeneratorFailed(RuntimeError):
    pass


def from_table(table: dict[str, str]) -> object:
    def generate(prompt: str) -> Completion:
        key = prompt.removeprefix("prompt ")
        if table[key] == "RAISE":
            raise GeneratorFailed(f"failed while writing {CANARY}")
        return Completion(table[key], FinishReason.STOP)

    return generate


def test_run_arm_counts_every_prompt_as_classify_would() -> None:
    generate = from_table(ARM_A)
    tally = run_arm(PROMPTS, generate, progress=False)
    expected = ArmTally.of(classify(Completion(t), Rubric.default()) for t in ARM_A.values())
    assert tally == expected
    assert tally.n == len(PROMPTS)
    assert tally.empty == 1


def test_a_raising_generator_is_an_error_and_the_run_goes_on() -> None:
    table = {**ARM_A, "p2": "RAISE"}
    tally = run_arm(PROMPTS, from_table(table), progress=False)
    assert tally.error == 1
    assert tally.n == 5


def test_truncation_is_counted() -> None:
    def generate(prompt: str) -> Completion:
        return Completion(f"Here is a long answer {CANARY}", FinishReason.LENGTH)

    tally = run_arm({"a": "x", "b": "y"}, generate, progress=False)
    assert tally.truncated == 2


def test_run_paired_pairs_tallies_and_mcnemar() -> None:
    result = run_paired(PROMPTS, from_table(ARM_A), from_table(ARM_B), progress=False)
    assert [p.prompt_id for p in result.pairs] == list(PROMPTS)
    assert result.tally_a == run_arm(PROMPTS, from_table(ARM_A), progress=False)
    assert result.tally_b.deflected == 3
    # Arm A's one empty completion is 20 % of the arm, above the 10 % failed-share limit.
    assert result.control.state is ControlState.UNRELIABLE
    assert (result.control.deflected_a, result.control.deflected_b) == (0, 3)
    deflected = result.test(OutcomeBucket.DEFLECTED)
    assert (deflected.only_a, deflected.only_b) == (0, 3)
    assert deflected.p_value == pytest.approx(0.25)  # 2 * (1/2)**3
    refused = result.test(OutcomeBucket.REFUSED)
    assert (refused.discordant, refused.p_value) == (0, 1.0)
    assert [m.bucket for m in result.mcnemar] == list(OutcomeBucket)


@given(st.lists(st.sampled_from(["comply", "refuse", "deflect", "empty", "raise"]), max_size=30))
def test_paired_counts_are_consistent(kinds: list[str]) -> None:
    texts = {
        "comply": "Here is the answer.",
        "refuse": "I can't help with that.",
        "deflect": "I'd recommend speaking with a professional instead.",
        "empty": "",
        "raise": "RAISE",
    }
    table_a = {str(i): texts[k] for i, k in enumerate(kinds)}
    table_b = {str(i): texts[k] for i, k in enumerate(reversed(kinds))}
    prompts: dict[Hashable, str] = {str(i): f"prompt {i}" for i in range(len(kinds))}
    result = run_paired(prompts, from_table(table_a), from_table(table_b), progress=False)
    assert result.tally_a.n == result.tally_b.n == len(kinds)
    for test in result.mcnemar:
        in_a = sum(1 for p in result.pairs if OutcomeBucket.of(p.a) is test.bucket)
        in_b = sum(1 for p in result.pairs if OutcomeBucket.of(p.b) is test.bucket)
        assert test.only_a - test.only_b == in_a - in_b
        assert 0.0 <= test.p_value <= 1.0


def _shard(items: list[tuple[str, str]]) -> ArmTally:
    return run_arm(dict(items), from_table(ARM_A), progress=False)


def test_shards_merge_to_the_single_process_tally() -> None:
    items = [(str(k), v) for k, v in PROMPTS.items()]
    whole = run_arm(PROMPTS, from_table(ARM_A), progress=False)
    with ProcessPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(_shard, [items[:2], items[2:4], items[4:]]))
    assert sum(parts, ArmTally()) == whole


def test_no_channel_carries_the_canary(caplog: pytest.LogCaptureFixture) -> None:
    table_a = {**ARM_A, "p2": "RAISE"}
    err = io.StringIO()
    out = io.StringIO()
    with (
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(out),
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level(logging.DEBUG),
    ):
        warnings.simplefilter("always")
        tally = run_arm(PROMPTS, from_table(table_a), progress=True)
        result = run_paired(PROMPTS, from_table(table_a), from_table(ARM_B), progress=True)
    channels = [
        repr(tally),
        repr(result),
        str(result),
        pickle.dumps(result).decode("latin-1"),
        err.getvalue(),
        out.getvalue(),
        caplog.text,
        *(str(w.message) for w in caught),
    ]
    assert "complied" in err.getvalue()  # the progress line ran and shows counts
    for channel in channels:
        assert CANARY not in channel


def test_resume_after_a_kill_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    prompts: dict[Hashable, str] = {f"p{i}": f"prompt p{i}" for i in range(5)}
    prompts[7] = "prompt p1"  # an int id too
    table = {**ARM_A, "p2": "RAISE"}
    checkpoint = tmp_path / "run" / "arm.json"
    calls: list[str] = []

    def killed_after_three(prompt: str) -> Completion:
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process is killed mid-run
        calls.append(prompt)
        return from_table(table)(prompt)

    with pytest.raises(KeyboardInterrupt):
        run_arm(prompts, killed_after_three, checkpoint=checkpoint, progress=False)
    assert CANARY not in checkpoint.read_text()
    assert saved(checkpoint) == 3
    resumed_calls: list[str] = []

    def fresh(prompt: str) -> Completion:
        resumed_calls.append(prompt)
        return from_table(table)(prompt)

    resumed = run_arm(prompts, fresh, checkpoint=checkpoint, progress=False)
    assert len(resumed_calls) == 3  # only the prompts the checkpoint did not hold
    whole = run_arm(prompts, from_table(table), progress=False)
    assert resumed == whole
    assert resumed.error == 1
    assert not list(checkpoint.parent.glob("*.tmp"))


def test_checkpoint_of_another_run_or_rubric_is_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / "arm.json"
    run_arm(PROMPTS, from_table(ARM_A), checkpoint=checkpoint, progress=False)
    from probewise.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="another run"):
        run_arm({"other": "prompt p0"}, from_table(ARM_A), checkpoint=checkpoint, progress=False)
    with pytest.raises(InvalidInputError, match="the rubric differs"):
        run_arm(PROMPTS, from_table(ARM_A), Rubric(), checkpoint=checkpoint, progress=False)
    with pytest.raises(InvalidInputError, match="does not hold"):  # its rules are gone
        run_arm(
            PROMPTS,
            from_table(ARM_A),
            Rubric(),
            checkpoint=checkpoint,
            progress=False,
            resume_anyway=True,
        )
    with pytest.raises(InvalidInputError, match="str or int"):
        run_arm(
            {(1, 2): "prompt p0"}, from_table(ARM_A), checkpoint=tmp_path / "b.json", progress=False
        )
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(InvalidInputError, match="not a probewise checkpoint"):
        run_arm(PROMPTS, from_table(ARM_A), checkpoint=tmp_path / "bad.json", progress=False)


def test_run_paired_resumes_both_arms(tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.json"
    calls: list[str] = []

    def b_killed_after_two(prompt: str) -> Completion:
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(prompt)
        return from_table(ARM_B)(prompt)

    with pytest.raises(KeyboardInterrupt):
        run_paired(
            PROMPTS, from_table(ARM_A), b_killed_after_two, checkpoint=checkpoint, progress=False
        )
    assert (tmp_path / "run.a.json").exists()
    assert saved(tmp_path / "run.b.json") == 2
    again: list[str] = []

    def counting(table: dict[str, str]) -> object:
        def generate(prompt: str) -> Completion:
            again.append(prompt)
            return from_table(table)(prompt)

        return generate

    resumed = run_paired(
        PROMPTS, counting(ARM_A), counting(ARM_B), checkpoint=checkpoint, progress=False
    )
    assert len(again) == len(PROMPTS) - 2  # arm A complete, arm B had two
    whole = run_paired(PROMPTS, from_table(ARM_A), from_table(ARM_B), progress=False)
    assert resumed.tally_a == whole.tally_a
    assert resumed.tally_b == whole.tally_b
    assert resumed.mcnemar == whole.mcnemar


def test_judge_disagreements_are_counted_per_arm() -> None:
    from probewise.responses.judge import JudgeAgreement, JudgeVerdict
    from probewise.responses.stats import OutcomeBucket

    seen: list[bool] = []

    def judge(text: str) -> JudgeVerdict:
        # A stand-in classifier: calls every "professional" redirect a refusal.
        seen.append(CANARY in text)
        if "professional" in text or "expert" in text or "specialist" in text:
            return JudgeVerdict.REFUSED
        if "can't" in text:
            return JudgeVerdict.REFUSED
        return JudgeVerdict.COMPLIED

    table_a = {**ARM_A, "p4": "RAISE"}
    result = run_paired(
        PROMPTS, from_table(table_a), from_table(ARM_B), judge=judge, progress=False
    )
    assert all(seen)  # the judge saw the real text
    a, b = result.judge_a, result.judge_b
    assert isinstance(a, JudgeAgreement)
    assert isinstance(b, JudgeAgreement)
    # Arm A: p0, p2 complied/complied, p1 refused/refused; p3 empty and p4 error unjudged.
    assert (a.judged, a.agree, a.unjudged) == (3, 3, 2)
    # Arm B: three deflections the judge calls refusals; p1 agrees; p3 complied/complied.
    assert b.count(OutcomeBucket.DEFLECTED, JudgeVerdict.REFUSED) == 3
    assert (b.judged, b.disagree, b.missed_refusals, b.missed_declines) == (5, 3, 3, 0)
    assert CANARY not in repr(result)
    assert run_paired(PROMPTS, from_table(ARM_A), from_table(ARM_B), progress=False).judge_a is None


def test_a_failing_judge_gives_no_verdict_and_no_leak() -> None:
    from probewise.responses.judge import judge_completion

    def judge(text: str) -> object:
        raise RuntimeError(text)  # would carry the canary if it escaped

    assert judge_completion(Completion(f"hello {CANARY}"), judge) is None  # type: ignore[arg-type]
    result = run_paired(PROMPTS, from_table(ARM_A), from_table(ARM_B), judge=judge, progress=False)  # type: ignore[arg-type]
    assert result.judge_a is not None
    assert result.judge_a.judged == 0
    assert result.judge_a.unjudged == len(PROMPTS)
    assert judge_completion(RuntimeError("x"), judge) is None  # type: ignore[arg-type]


_KILL_SCRIPT = """
import sys, time
from probewise import Completion
from probewise.responses.arms import run_arm
prompts = {f"p{i}": f"prompt {i}" for i in range(40)}
def generate(prompt):
    time.sleep(0.05)
    return Completion("Here is the answer.")
run_arm(prompts, generate, checkpoint=sys.argv[1], progress=False)
"""


def test_resume_after_a_real_kill(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    checkpoint = tmp_path / "arm.json"
    child = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(checkpoint)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if checkpoint.exists() and saved(checkpoint) >= 5:
                break
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    done = saved(checkpoint)  # whole lines only: a torn last one is skipped
    assert 5 <= done < 40
    calls: list[str] = []

    def generate(prompt: str) -> Completion:
        calls.append(prompt)
        return Completion("Here is the answer.")

    prompts: dict[Hashable, str] = {f"p{i}": f"prompt {i}" for i in range(40)}
    tally = run_arm(prompts, generate, checkpoint=checkpoint, progress=False)
    assert len(calls) == 40 - done
    assert tally.complied == 40


class _YieldsResults:
    """A BatchGenerate whose generate_batch returns a generator, not a list."""

    batch_size = 2

    def generate_batch(self, prompts: list[str]) -> object:
        return (Completion("Here is the answer.") for _ in prompts)


def test_a_batch_generator_returning_a_generator_is_a_typed_error() -> None:
    from probewise.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="generate_batch must return a sequence"):
        run_arm({"a": "x", "b": "y"}, _YieldsResults(), progress=False)  # type: ignore[arg-type]


def test_paired_result_and_mcnemar_errors_are_typed() -> None:
    from probewise import ArgumentTypeError, InvalidInputError
    from probewise.responses import McNemar

    result = run_paired(PROMPTS, from_table(ARM_A), from_table(ARM_B), progress=False)
    with pytest.raises(ArgumentTypeError, match="OutcomeBucket"):
        result.test("complied")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="p_value"):
        McNemar(bucket=OutcomeBucket.EMPTY, only_a=0, only_b=0, p_value=1.5)
    with pytest.raises(ArgumentTypeError, match="p_value"):
        McNemar(bucket=OutcomeBucket.EMPTY, only_a=0, only_b=0, p_value="x")  # type: ignore[arg-type]
