"""The checkpoint journal: round trips, O(batch) appends, torn lines, corrupt input,
the old format, orphaned temporary files, fsync."""

from __future__ import annotations

import functools
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
from probewise.errors import CheckpointMismatchError

# Private: the checkpoint format is tested at its reader and writer; run_arm only resumes from it.
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
    """A journal of the previous format (no checksums, no digests): its records read as
    the current format's do."""
    path = tmp_path / "arm.json"
    header = json.dumps({"format": journal_module.V2_FORMAT}).encode()
    path.write_bytes(b"\n".join([header, *lines]) + (b"\n" if newline else b""))
    return path


GOOD = b'[["s:a",{"b":"empty","t":false}]]'


def _calls(calls: list[str], prompt: str) -> Completion:
    calls.append(prompt)
    return Completion("" if prompt == "A" else "Here is the answer.")


def test_a_torn_last_line_is_skipped_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    calls: list[str] = []
    generate = functools.partial(_calls, calls)
    run_arm({"a": "A"}, generate, checkpoint=path, progress=False)
    with path.open("ab") as handle:
        handle.write(b'[["s:b",{"b":"comp')
    assert journal_module.read(path, Rubric.default()) == {"a": Empty()}
    tally = run_arm({"a": "A", "b": "B", "c": "C"}, generate, checkpoint=path, progress=False)
    assert calls == ["A", "B", "C"]  # the torn batch is generated again, once
    assert (tally.empty, tally.complied) == (1, 2)
    assert path.read_bytes().count(b"\n") == 4  # header, a, b, c: the torn bytes are gone
    assert set(journal_module.read(path, Rubric.default())) == {"a", "b", "c"}


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

    prompts: dict[Hashable, str] = {"a": "A", 7: "B", "c": "C"}
    with pytest.raises(CheckpointMismatchError, match="holds no run identity"):
        run_arm(prompts, generate, checkpoint=path, progress=False)
    tally = run_arm(prompts, generate, checkpoint=path, progress=False, resume_anyway=True)
    assert calls == ["C"]
    assert (tally.refused, tally.error, tally.complied) == (1, 1, 1)
    first_line = path.read_bytes().split(b"\n", 1)[0]
    assert json.loads(first_line.rpartition(b"\t")[0])["format"] == journal_module.FORMAT
    run_arm(prompts, generate, checkpoint=path, progress=False)  # adopted: resumes as its own
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


@pytest.mark.parametrize(
    "left", [b"", journal_module._V3_START[:7], journal_module._V3_START + b', "ru']
)
def test_a_journal_killed_while_its_header_was_written_is_empty(
    tmp_path: Path, left: bytes
) -> None:
    path = tmp_path / "arm.json"
    path.write_bytes(left)
    assert journal_module.read(path, RUBRIC) == {}
    tally = run_arm({"a": "x"}, _answer, checkpoint=path, progress=False)
    assert tally.complied == 1
    assert journal_module.read(path, RUBRIC) == {"a": Complied()}
    assert path.read_bytes().startswith(journal_module._V3_START)


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


# --- run identity, lock, checksums, paths (issue 30) ---------------------------------


class _Described:
    """A generator of the caller's own that describes itself to the checkpoint."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.calls = 0

    def run_identity(self) -> dict[str, str]:
        return {"model": self.model}

    def __call__(self, prompt: str) -> Completion:
        self.calls += 1
        return Completion("Here is the answer.")


PROMPTS3: dict[Hashable, str] = {"a": "A", "b": "B", 7: "C"}


def test_a_resume_under_another_model_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    run_arm(PROMPTS3, _Described("model-one"), checkpoint=path, progress=False)
    other = _Described("model-two")
    with pytest.raises(CheckpointMismatchError) as info:
        run_arm(PROMPTS3, other, checkpoint=path, progress=False)
    message = str(info.value)
    assert 'model was "model-one", now "model-two"' in message
    assert "resume_anyway=True" in message
    assert "\n" not in message
    assert other.calls == 0
    assert info.value.differences == ('the generator\'s model was "model-one", now "model-two"',)
    tally = run_arm(PROMPTS3, other, checkpoint=path, progress=False, resume_anyway=True)
    assert (tally.complied, other.calls) == (3, 0)
    run_arm(PROMPTS3, other, checkpoint=path, progress=False)  # adopted: its own now
    with pytest.raises(CheckpointMismatchError, match="model-one"):
        run_arm(PROMPTS3, _Described("model-one"), checkpoint=path, progress=False)


def test_a_resume_with_rewritten_prompts_is_refused_naming_the_count(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)
    rewritten: dict[Hashable, str] = {"a": "A", "b": "B, rewritten", 7: "C, rewritten"}
    with pytest.raises(
        CheckpointMismatchError, match=r"2 prompts' texts differ \(the first: id 'b'\)"
    ):
        run_arm(rewritten, _answer, checkpoint=path, progress=False)
    more: dict[Hashable, str] = {**PROMPTS3, "new": "D"}
    assert run_arm(more, _answer, checkpoint=path, progress=False).n == 4  # new ids are fine


def test_a_resume_with_a_generator_that_now_describes_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)
    with pytest.raises(CheckpointMismatchError, match="model is new"):
        run_arm(PROMPTS3, _Described("m"), checkpoint=path, progress=False)


def test_an_edited_line_fails_its_checksum(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)
    data = path.read_bytes()
    assert data.count(b'"b":"complied"') == 3
    path.write_bytes(data.replace(b'"b":"complied","t":false,"ev":[]', b'"b":"empty","t":false', 1))
    with pytest.raises(InvalidInputError, match=r"arm.json:2: the line's checksum does not match"):
        run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)
    header, _, rest = data.partition(b"\n")
    edited = header.replace(b'"rubric": "', b'"rubric": "0', 1)
    assert edited != header
    path.write_bytes(edited + b"\n" + rest)
    with pytest.raises(InvalidInputError, match=r"arm.json:1: the line's checksum does not match"):
        run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)


def test_a_second_writer_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "arm.json"
    journal, _ = journal_module.Journal.open(path, Rubric.default())
    try:
        with pytest.raises(journal_module.CheckpointInUseError, match="in use by another run"):
            run_arm(PROMPTS3, _answer, checkpoint=path, progress=False)
    finally:
        journal.close()
    assert run_arm(PROMPTS3, _answer, checkpoint=path, progress=False).complied == 3
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 5  # the header, one line per prompt, the final newline


def test_checkpoint_paths_are_regular_files_only(tmp_path: Path) -> None:
    from probewise import run_paired

    with pytest.raises(InvalidInputError, match="not a regular file"):
        run_paired(PROMPTS3, _answer, _answer, checkpoint="/dev/null", progress=False)
    assert not Path("/dev/null.a.json").exists()
    with pytest.raises(InvalidInputError, match="not a regular file"):
        run_arm(PROMPTS3, _answer, checkpoint="/dev/null", progress=False)
    with pytest.raises(InvalidInputError, match="cannot open the checkpoint"):
        run_paired(PROMPTS3, _answer, _answer, checkpoint="/proc/self/status", progress=False)
    with pytest.raises(InvalidInputError, match=r"^/proc/self/status:1: not JSON"):
        run_arm(PROMPTS3, _answer, checkpoint="/proc/self/status", progress=False)


def test_the_fingerprint_follows_what_decides_an_outcome() -> None:
    base = journal_module.rubric_fingerprint(RUBRIC)
    assert base == journal_module.rubric_fingerprint(
        Rubric(refusal=RUBRIC.refusal, deflection=RUBRIC.deflection, axes={"cake": (AXIS_RULE,)})
    )
    for changed in (
        Rubric(refusal=RUBRIC.refusal, deflection=RUBRIC.deflection),
        Rubric(refusal=RUBRIC.refusal[1:], deflection=RUBRIC.deflection, axes=RUBRIC.axes),
        Rubric(refusal=RUBRIC.refusal, deflection=RUBRIC.deflection, axes=RUBRIC.axes, timeout=1.0),
        Rubric(
            refusal=RUBRIC.refusal, deflection=RUBRIC.deflection, axes=RUBRIC.axes, opening_chars=9
        ),
        Rubric(
            refusal=RUBRIC.refusal,
            deflection=RUBRIC.deflection,
            axes=RUBRIC.axes,
            later=RUBRIC.refusal[:1],
        ),
        Rubric(
            refusal=RUBRIC.refusal, deflection=RUBRIC.deflection, axes=RUBRIC.axes, own_voice=False
        ),
    ):
        assert journal_module.rubric_fingerprint(changed) != base
