"""The checkpoint journal: round trips, O(batch) appends, torn lines, corrupt input,
the old format, orphaned temporary files, fsync."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Hashable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probewise import (
    Completion,
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    InvalidInputError,
    Outcome,
    Refused,
    Rubric,
    Rule,
    run_arm,
)
from probewise.responses import _journal as journal_module

AXIS_RULE = Rule("axis.step", r"\bstep\b")
RUBRIC = Rubric(
    refusal=Rubric.default().refusal,
    deflection=Rubric.default().deflection,
    axes={"cake": (AXIS_RULE,)},
)


def outcomes_strategy() -> st.SearchStrategy[Outcome]:
    flags = st.booleans()
    return st.one_of(
        st.builds(Complied, truncated=flags, evidence=st.sampled_from([(), (AXIS_RULE,)])),
        st.builds(Deflected, truncated=flags, rule=st.sampled_from([None, *RUBRIC.deflection])),
        st.builds(
            Refused,
            truncated=flags,
            rule=st.sampled_from([None, *RUBRIC.refusal]),
            by_provider=flags,
        ),
        st.builds(Empty, truncated=flags),
        st.builds(Error, kind=st.sampled_from(list(ErrorKind))),
    )


ids = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(10**99) + 1, max_value=10**100 - 1),
)


@settings(max_examples=40)
@given(st.lists(st.dictionaries(ids, outcomes_strategy(), max_size=5), max_size=6))
def test_journal_round_trips(batches: list[dict[Hashable, Outcome]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "arm.json"
        journal, done = journal_module.Journal.open(path, RUBRIC)
        assert done == {}
        expected: dict[Hashable, Outcome] = {}
        for batch in batches:
            fresh = {k: v for k, v in batch.items() if k not in expected}
            journal.append(fresh)
            expected.update(fresh)
        journal.close()
        got = journal_module.read(path, RUBRIC)
        assert got == expected
        for key, outcome in got.items():  # the rubric's own rule objects
            assert getattr(outcome, "rule", None) is getattr(expected[key], "rule", None)
            assert type(key) is type(next(k for k in expected if k == key and type(k) is type(key)))


def _answer(prompt: str) -> Completion:
    return Completion("Here is the answer.")


def test_each_batch_appends_one_line_and_rewrites_nothing(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    snapshots: list[tuple[int, bytes]] = []

    def generate(prompt: str) -> Completion:
        if path.exists():
            snapshots.append((path.stat().st_ino, path.read_bytes()))
        return Completion("Here is the answer.")

    prompts: dict[Hashable, str] = {f"p{i:02d}": f"prompt {i}" for i in range(30)}
    run_arm(prompts, generate, checkpoint=path, progress=False)
    snapshots.append((path.stat().st_ino, path.read_bytes()))
    inodes = {inode for inode, _ in snapshots}
    assert len(inodes) == 1  # appended in place, never replaced
    for (_, before), (_, after) in itertools.pairwise(snapshots):
        assert after.startswith(before)  # earlier bytes are never rewritten
        grown = after[len(before) :]
        assert grown.count(b"\n") == 1  # one line per batch (batch size 1 here)
    sizes = {len(b) - len(a) for (_, a), (_, b) in itertools.pairwise(snapshots)}
    assert len(sizes) == 1  # the same cost for the 2nd batch and the 30th


def _journal(tmp_path: Path, lines: list[bytes], *, newline: bool = True) -> Path:
    path = tmp_path / "arm.json"
    header = json.dumps({"format": journal_module.FORMAT}).encode()
    path.write_bytes(b"\n".join([header, *lines]) + (b"\n" if newline else b""))
    return path


GOOD = b'[["s:a",{"b":"empty","t":false}]]'


def test_a_torn_last_line_is_skipped_and_cut(tmp_path: Path) -> None:
    path = _journal(tmp_path, [GOOD, b'[["s:b",{"b":"comp'], newline=False)
    assert journal_module.read(path, RUBRIC) == {"a": Empty()}
    calls: list[str] = []

    def generate(prompt: str) -> Completion:
        calls.append(prompt)
        return Completion("Here is the answer.")

    tally = run_arm({"a": "A", "b": "B", "c": "C"}, generate, checkpoint=path, progress=False)
    assert calls == ["B", "C"]  # the torn batch is generated again, once
    assert (tally.empty, tally.complied) == (1, 2)
    assert path.read_bytes().count(b"\n") == 4  # header, a, b, c: the torn bytes are gone
    assert set(journal_module.read(path, RUBRIC)) == {"a", "b", "c"}


DEEP = b"[" * 100_000 + b"]" * 100_000
CORRUPT: list[tuple[str, bytes]] = [
    ("bad int key", b'[["i:abc",{"b":"empty","t":false}]]'),
    ("5000-digit key", b'[["i:' + b"9" * 5000 + b'",{"b":"empty","t":false}]]'),
    ("non-canonical int key", b'[["i:01",{"b":"empty","t":false}]]'),
    ("minus zero key", b'[["i:-0",{"b":"empty","t":false}]]'),
    ("untagged key", b'[["a",{"b":"empty","t":false}]]'),
    ("number as key", b'[[1,{"b":"empty","t":false}]]'),
    ("NaN flag", b'[["s:x",{"b":"empty","t":NaN}]]'),
    ("Infinity flag", b'[["s:x",{"b":"empty","t":Infinity}]]'),
    ("overflowing float flag", b'[["s:x",{"b":"empty","t":1e999}]]'),
    ("huge int literal", b'[["s:x",{"b":"empty","t":' + b"9" * 5000 + b"}]]"),
    ("int flag", b'[["s:x",{"b":"empty","t":1}]]'),
    ("string flag", b'[["s:x",{"b":"empty","t":"true"}]]'),
    ("deep nesting", DEEP),
    ("shallow nesting", b'[["s:x",{"b":"empty","t":[[false]]}]]'),
    ("not a list", b'{"s:x":{"b":"empty","t":false}}'),
    ("not a pair", b'[["s:x"]]'),
    ("record not an object", b'[["s:x",[1]]]'),
    ("unknown bucket", b'[["s:x",{"b":"maybe","t":false}]]'),
    ("extra field", b'[["s:x",{"b":"empty","t":false,"text":"hi"}]]'),
    ("missing field", b'[["s:x",{"b":"refused","t":false,"r":null}]]'),
    ("repeated field", b'[["s:x",{"b":"empty","t":false,"t":true}]]'),
    ("unknown rule", b'[["s:x",{"b":"deflected","t":false,"r":"nope"}]]'),
    ("rule id not a string", b'[["s:x",{"b":"deflected","t":false,"r":7}]]'),
    ("evidence not a list", b'[["s:x",{"b":"complied","t":false,"ev":"axis.step"}]]'),
    ("unknown error kind", b'[["s:x",{"b":"error","k":"oops"}]]'),
    ("not UTF-8", b'[["s:\xff",{"b":"empty","t":false}]]'),
    ("blank line", b""),
    ("not JSON", b"[[oops"),
]


@pytest.mark.parametrize(("name", "line"), CORRUPT, ids=[name for name, _ in CORRUPT])
def test_every_corrupt_line_is_an_invalid_input_error_naming_it(
    tmp_path: Path, name: str, line: bytes
) -> None:
    path = _journal(tmp_path, [GOOD, line, GOOD.replace(b"s:a", b"s:z")])
    start = time.monotonic()
    with pytest.raises(InvalidInputError) as info:
        journal_module.read(path, RUBRIC)
    assert time.monotonic() - start < 5
    assert str(info.value).startswith(f"{path}:3: "), name
    assert len(str(info.value)) < 400  # one line, never the whole input echoed
    assert "\n" not in str(info.value)


LONG = b'[["s:' + b"a" * 10_000 + b'",{"b":"empty","t":false}]]'


ONE = b'[["i:1",{"b":"empty","t":false}]]'


@pytest.mark.parametrize(
    ("first", "second"),
    [(ONE, ONE), (GOOD, b'[["s:a",{"b":"empty","t":true}]]'), (LONG, LONG)],
)
def test_a_repeated_prompt_id_is_refused(tmp_path: Path, first: bytes, second: bytes) -> None:
    path = _journal(tmp_path, [first, second])
    with pytest.raises(InvalidInputError, match=r":3: prompt id .* repeats the one on line 2"):
        journal_module.read(path, RUBRIC)
    with pytest.raises(InvalidInputError) as info:
        journal_module.read(path, RUBRIC)
    assert len(str(info.value)) < 400


def test_int_ids_over_the_digit_bound_are_refused_when_written(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="at most 100 digits"):
        run_arm({10**100: "x"}, _answer, checkpoint=tmp_path / "a.json", progress=False)
    tally = run_arm({10**99: "x", -(10**99): "y"}, _answer, checkpoint=tmp_path / "b.json")
    assert tally.complied == 2
    assert set(journal_module.read(tmp_path / "b.json", RUBRIC)) == {10**99, -(10**99)}


def _old_checkpoint(path: Path, records: dict[str, object]) -> None:
    """What the previous version wrote: one JSON document, rewritten whole."""
    path.write_text(json.dumps({"format": journal_module.OLD_FORMAT, "outcomes": records}))


def test_the_old_format_is_read_once_and_rewritten_as_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    _old_checkpoint(
        path,
        {
            "s:a": {"b": "refused", "t": False, "r": "refusal.cannot", "p": False},
            "i:7": {"b": "error", "k": "generation"},
        },
    )
    old = journal_module.read(path, Rubric.default())
    assert old == {
        "a": Refused(rule=Rubric.default().refusal[0]),
        7: Error(kind=ErrorKind.GENERATION),
    }
    calls: list[str] = []

    def generate(prompt: str) -> Completion:
        calls.append(prompt)
        return Completion("Here is the answer.")

    tally = run_arm({"a": "A", 7: "B", "c": "C"}, generate, checkpoint=path, progress=False)
    assert calls == ["C"]
    assert (tally.refused, tally.error, tally.complied) == (1, 1, 1)
    first_line = path.read_bytes().split(b"\n", 1)[0]
    assert json.loads(first_line) == {"format": journal_module.FORMAT}
    assert journal_module.read(path, Rubric.default()) == {**old, "c": Complied()}


def test_a_corrupt_old_checkpoint_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    _old_checkpoint(path, {"i:01": {"b": "empty", "t": False}})
    with pytest.raises(InvalidInputError, match=r"arm.json:1: prompt key 'i:01'"):
        journal_module.read(path, RUBRIC)
    _old_checkpoint(path, {"s:a": {"b": "empty", "t": float("nan")}})
    with pytest.raises(InvalidInputError, match=r"arm.json:1: NaN"):
        journal_module.read(path, RUBRIC)


def test_a_checkpoint_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "arm.json"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        run_arm({"a": "x"}, _answer, checkpoint=fifo, progress=False)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(InvalidInputError, match="not a regular file"):
        run_arm({"a": "x"}, _answer, checkpoint=folder, progress=False)


@pytest.mark.parametrize("left", [b"", journal_module._HEADER[:7]])
def test_a_journal_killed_while_its_header_was_written_is_empty(
    tmp_path: Path, left: bytes
) -> None:
    path = tmp_path / "arm.json"
    path.write_bytes(left)
    assert journal_module.read(path, RUBRIC) == {}
    tally = run_arm({"a": "x"}, _answer, checkpoint=path, progress=False)
    assert tally.complied == 1
    assert journal_module.read(path, RUBRIC) == {"a": Complied()}
    assert path.read_bytes().startswith(journal_module._HEADER)


def test_orphaned_temporary_files_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    orphans = [tmp_path / ".arm.json.k1x2_9q.tmp", tmp_path / ".arm.json.zz.tmp"]
    other = tmp_path / ".other.json.k1x2_9q.tmp"
    for stray in [*orphans, other]:
        stray.write_text("{")
    run_arm({"a": "x"}, _answer, checkpoint=path, progress=False)
    assert not any(stray.exists() for stray in orphans)
    assert other.exists()  # another checkpoint's file is left alone


def test_records_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def fsync(handle: int) -> None:
        synced.append(handle)
        real(handle)

    monkeypatch.setattr(os, "fsync", fsync)
    # As for batches that come slower than the sync gap (a real model's):
    monkeypatch.setattr(journal_module, "SYNC_GAP", 0.0)
    monkeypatch.setattr(journal_module, "SYNC_COST_FACTOR", 0)
    prompts: dict[Hashable, str] = {f"p{i}": "x" for i in range(5)}
    run_arm(prompts, _answer, checkpoint=tmp_path / "arm.json", progress=False)
    assert len(synced) >= len(prompts)  # each batch


def test_a_fast_run_shares_fsyncs_but_syncs_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    monkeypatch.setattr(journal_module, "SYNC_GAP", 3600.0)
    prompts: dict[Hashable, str] = {f"p{i}": "x" for i in range(50)}
    run_arm(prompts, _answer, checkpoint=tmp_path / "arm.json", progress=False)
    assert len(synced) == 2  # once at the end (the file, then its new folder entry)
