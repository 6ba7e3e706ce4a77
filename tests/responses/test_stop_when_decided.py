"""run_arm with a streaming server: replies stop once decided, the outcome says so,
the tally counts tokens, and a checkpoint keeps the decided mark (issue 33)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from _hostile_server import hostile, hostile_url
from probewise import ArmTally, Complied, OpenAICompatibleGenerator, run_arm, run_paired
from probewise.errors import ArgumentTypeError, InvalidInputError
from probewise.responses.decide import StopWhenDecided, per_prompt


def _generator(url: str, *, stream: bool) -> OpenAICompatibleGenerator:
    return OpenAICompatibleGenerator(
        url, "m", max_tokens=64, timeout=5.0, retries=0, rng=random.Random(0), stream=stream
    )


def test_run_arm_stops_streams_and_keeps_the_mark(tmp_path: Path) -> None:
    prompts = {"long": "sselong:1", "short": "sse:1", "whole": "stop:1"}
    checkpoint = tmp_path / "run.jsonl"
    with hostile() as server:
        server.slow_seconds = 3.0
        generator = _generator(hostile_url(server), stream=True)
        tally = run_arm(prompts, generator, checkpoint=checkpoint)
        assert tally.complied == 3
        assert tally.decided == 1  # the endless stream, closed once decided
        assert tally.truncated == 0
        assert tally.counted == 2  # the streams count their tokens; the JSON body has no usage
        assert tally.tokens > 0
        requests = server.requests
        resumed = run_arm(prompts, generator, checkpoint=checkpoint)
        assert server.requests == requests  # nothing generated again
        assert (resumed.complied, resumed.decided) == (3, 1)  # the journal kept the mark
        # The same run without stopping is another run: its checkpoint refuses it.
        with pytest.raises(InvalidInputError, match="stop_when_decided"):
            run_arm(prompts, generator, checkpoint=checkpoint, stop_when_decided=False)


def test_stop_when_decided_is_off_with_a_judge_or_a_plain_generator() -> None:
    with hostile() as server:
        server.slow_seconds = 0.5
        url = hostile_url(server)
        plain = _generator(url, stream=False)
        assert not plain.can_stop_when_decided
        tally = run_arm({1: "stop:1"}, plain)
        assert (tally.complied, tally.decided) == (1, 0)

        def judge(text: str) -> bool:
            return bool(text)

        streamed = _generator(url, stream=True)
        result = run_paired({1: "sselong:1"}, streamed, streamed, judge=judge)  # type: ignore[arg-type]
        # With a judge nothing stops: the endless stream ends without a finish reason.
        assert result.tally_a.decided == 0
        assert result.tally_a.error == 1


def test_a_decided_outcome_is_the_whole_replys() -> None:
    with hostile() as server:
        server.slow_seconds = 3.0
        generator = _generator(hostile_url(server), stream=True)
        result = run_paired({1: "sselong:1", 2: "sse:1"}, generator, generator)
    assert result.tally_a == result.tally_b
    for pair in result.pairs:
        assert pair.a == pair.b
        assert isinstance(pair.a, Complied)
    assert result.tally_a.decided == 1


def test_stop_arguments_are_checked() -> None:
    stop = StopWhenDecided()
    assert per_prompt(None, 2) == [None, None]
    assert per_prompt(stop, 2) == [stop, stop]
    assert per_prompt([stop, None], 2) == [stop, None]
    with pytest.raises(InvalidInputError):
        per_prompt([stop], 2)
    with pytest.raises(ArgumentTypeError):
        per_prompt(["x", None], 2)  # type: ignore[list-item]
    with pytest.raises(ArgumentTypeError):
        StopWhenDecided(axis=[])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        StopWhenDecided(every=0)
    with pytest.raises(ArgumentTypeError):
        run_arm({}, lambda p: p, stop_when_decided="yes")  # type: ignore[arg-type]
    assert ArmTally(complied=2, tokens=30, counted=2).tokens_per_prompt == 15.0
    with pytest.raises(InvalidInputError):
        ArmTally(complied=1, counted=2)
    with pytest.raises(InvalidInputError):
        ArmTally(error=1, decided=1)
