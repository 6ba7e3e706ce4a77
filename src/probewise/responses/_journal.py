"""The checkpoint of a run: an append-only journal of outcomes by prompt id, never text.

The file is JSON lines. The first line is the header ``{"format":
"probewise.arm-journal/2"}``; every other line is one batch, a JSON array of
``[key, record]`` pairs. A key is the prompt id tagged with its type (``s:`` and the
string, or ``i:`` and the int in canonical decimal, at most :data:`MAX_INT_DIGITS`
digits). A record names the bucket (``b``), the truncation flag (``t``), the rule ids
(``r``, or ``ev`` for axis evidence; resolved against the rubric on resume), the
provider flag (``p``) and the error kind (``k``), and nothing else.

Writing: the file is opened for appending (a new one gets its header line first:
a crash before that line is whole leaves a prefix of it, which reads as an empty
journal); each batch is one ``write`` of one whole line, so a batch costs O(batch),
whatever the run's length. The line is in the kernel as soon as the write returns, so a killed
process loses no batch it finished. It is fsynced at once when the last fsync is at
least :data:`SYNC_GAP` seconds (or ten times that fsync's own duration) old, and
always when the run ends or stops: batches that come faster than that share one
fsync (a group commit), so a power cut or an OS crash can cost the batches of the
last fraction of a second. Those are generated again on resume, never counted twice.

Reading: a last line without its newline is a write torn by a crash: it is skipped
(and cut off before the next append). Anything else that is wrong (a bad key, a
repeated prompt id, a value of the wrong type, NaN, a nesting, a rule the rubric
does not hold) is an :class:`~probewise.InvalidInputError` naming the file and the
line. A checkpoint in the previous format (one JSON document,
``probewise.arm-checkpoint/1``, rewritten whole after every batch) is read once and
rewritten as a journal. Temporary files that a killed run left beside the
checkpoint are removed when it is opened.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
import time
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import NoReturn, cast, final

from probewise.errors import InvalidInputError
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    Outcome,
    Refused,
)
from probewise.responses.rubric import Rubric
from probewise.responses.rules import Rule

FORMAT = "probewise.arm-journal/2"
OLD_FORMAT = "probewise.arm-checkpoint/1"
MAX_INT_DIGITS = 100
"""Int prompt ids have at most this many decimal digits (so reading one is cheap)."""
SYNC_GAP = 0.2
"""Seconds: a batch written this long after the last fsync is fsynced at once."""
SYNC_COST_FACTOR = 10
"""... or this many times the last fsync's duration, when that is longer (so that
fsyncs take at most about a tenth of a fast run's time)."""

_HEADER = (json.dumps({"format": FORMAT}) + "\n").encode("ascii")
_INT_KEY = re.compile(rf"i:(0|-?[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})")
_FIELDS: dict[str, frozenset[str]] = {
    "complied": frozenset({"b", "t", "ev"}),
    "deflected": frozenset({"b", "t", "r"}),
    "refused": frozenset({"b", "t", "r", "p"}),
    "empty": frozenset({"b", "t"}),
    "error": frozenset({"b", "k"}),
}


class _Bad(Exception):
    """A record or key is wrong; the reader adds the file and the line."""


def _fail(message: str) -> NoReturn:
    raise _Bad(message)


def _key(prompt_id: Hashable) -> str:
    if isinstance(prompt_id, bool) or not isinstance(prompt_id, str | int):
        raise InvalidInputError(
            f"a checkpoint needs prompt ids that are str or int, got a {type(prompt_id).__name__}"
        )
    if isinstance(prompt_id, str):
        return f"s:{prompt_id}"
    # (The bit length first: str() of a very large int is slow, or refused.)
    if prompt_id.bit_length() > 4 * MAX_INT_DIGITS or len(str(abs(prompt_id))) > MAX_INT_DIGITS:
        raise InvalidInputError(
            f"a checkpoint needs int prompt ids of at most {MAX_INT_DIGITS} digits"
        )
    return f"i:{prompt_id}"


def _unkey(key: object) -> Hashable:
    if not isinstance(key, str):
        _fail(f"a prompt key must be a string, got {_kind(key)}")
    if key.startswith("s:"):
        return key[2:]
    match = _INT_KEY.fullmatch(key)
    if match is None:
        _fail(
            f"prompt key {_short(key)!r} is neither s:<string> nor i:<int> "
            f"(canonical, at most {MAX_INT_DIGITS} digits)"
        )
    return int(match[1])


def _short(key: str) -> str:
    """A key cut to 40 characters, for a one-line message."""
    return key if len(key) <= 40 else key[:40] + "..."


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _record(outcome: Outcome) -> dict[str, object]:
    match outcome:
        case Complied(truncated=truncated, evidence=evidence):
            return {"b": "complied", "t": truncated, "ev": [r.id for r in evidence]}
        case Deflected(truncated=truncated, rule=rule):
            return {"b": "deflected", "t": truncated, "r": None if rule is None else rule.id}
        case Refused(truncated=truncated, rule=rule, by_provider=by_provider):
            return {
                "b": "refused",
                "t": truncated,
                "r": None if rule is None else rule.id,
                "p": by_provider,
            }
        case Empty(truncated=truncated):
            return {"b": "empty", "t": truncated}
        case Error(kind=kind):
            return {"b": "error", "k": kind.value}


def _find(rules: Iterable[Rule], rule_id: object) -> Rule | None:
    if rule_id is None:
        return None
    if not isinstance(rule_id, str):
        _fail(f"a rule id must be a string or null, got {_kind(rule_id)}")
    for rule in rules:
        if rule.id == rule_id:
            return rule
    _fail(
        f"the checkpoint names rule {rule_id!r}, which this rubric does not hold: "
        "resume with the rubric the run started with"
    )


def _flag(record: Mapping[str, object], field: str) -> bool:
    value = record[field]
    if not isinstance(value, bool):
        _fail(f"field {field!r} must be true or false, got {_kind(value)}")
    return value


def _outcome(value: object, rubric: Rubric) -> Outcome:
    if not isinstance(value, dict):
        _fail(f"a record must be an object, got {_kind(value)}")
    record = cast("dict[str, object]", value)
    bucket = record.get("b")
    fields = _FIELDS.get(bucket) if isinstance(bucket, str) else None
    if fields is None:
        _fail(f"field 'b' must name a bucket ({', '.join(_FIELDS)})")
    if record.keys() != fields:
        _fail(f"a {bucket} record has the fields {sorted(fields)}, got {sorted(record)}")
    if bucket == "error":
        kind = record["k"]
        known = {k.value: k for k in ErrorKind}
        if not isinstance(kind, str) or kind not in known:
            _fail(f"field 'k' must name an error kind ({', '.join(known)})")
        return Error(kind=known[kind])
    truncated = _flag(record, "t")
    if bucket == "complied":
        ids = record["ev"]
        if not isinstance(ids, list):
            _fail(f"field 'ev' must be a list of rule ids, got {_kind(ids)}")
        axis_rules = [rule for rules in rubric.axes.values() for rule in rules]
        evidence = [_find(axis_rules, rule_id) for rule_id in cast("list[object]", ids)]
        return Complied(truncated=truncated, evidence=tuple(r for r in evidence if r is not None))
    if bucket == "deflected":
        return Deflected(truncated=truncated, rule=_find(rubric.deflection, record["r"]))
    if bucket == "refused":
        return Refused(
            truncated=truncated,
            rule=_find(rubric.refusal, record["r"]),
            by_provider=_flag(record, "p"),
        )
    return Empty(truncated=truncated)


def _constant(name: str) -> NoReturn:
    _fail(f"{name} is not a JSON value a checkpoint holds")


def _pairs(items: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(items)
    if len(out) != len(items):
        _fail("an object repeats a field")
    return out


def _json(line: bytes) -> object:
    try:
        return cast(
            "object",
            json.loads(line, parse_constant=_constant, object_pairs_hook=_pairs),
        )
    except RecursionError:
        _fail("the line nests too deeply")
    except UnicodeDecodeError:
        _fail("the line is not UTF-8")
    except json.JSONDecodeError as error:
        _fail(f"not JSON ({error.msg}, column {error.colno})")
    except ValueError:  # e.g. an integer literal past int()'s digit limit
        _fail("a value that cannot be read")


@final
class _Reader:
    """Outcomes read from a checkpoint file, and where its whole lines end."""

    def __init__(self, path: Path, rubric: Rubric) -> None:
        self.path = path
        self.rubric = rubric
        self.outcomes: dict[Hashable, Outcome] = {}
        self.lines: dict[Hashable, int] = {}
        self.old = False
        self.end = 0  # the byte length of the whole lines

    def fail(self, line: int, message: str) -> NoReturn:
        raise InvalidInputError(f"{self.path}:{line}: {message}") from None

    def add(self, line: int, key: object, record: object) -> None:
        try:
            prompt_id = _unkey(key)
            outcome = _outcome(record, self.rubric)
        except _Bad as error:
            self.fail(line, str(error))
        first = self.lines.get(prompt_id)
        if first is not None:
            shown = _short(key) if isinstance(key, str) else key
            self.fail(line, f"prompt id {shown!r} repeats the one on line {first}")
        self.lines[prompt_id] = line
        self.outcomes[prompt_id] = outcome

    def read(self) -> None:
        if not self.path.is_file():  # a FIFO would block, a folder cannot be read
            raise InvalidInputError(f"the checkpoint {self.path} is not a regular file")
        try:
            data = self.path.read_bytes()
        except OSError as error:
            raise InvalidInputError(
                f"cannot read the checkpoint {self.path}: {error.strerror}"
            ) from None
        if _HEADER.startswith(data):  # created, and killed before the header was whole
            self.end = 0
            return
        first, newline, _ = data.partition(b"\n")
        try:
            header = _json(first) if newline else None
        except _Bad:
            header = None
        if header != {"format": FORMAT}:
            self.read_old(data)
            return
        # A last line without its newline is a torn write: skipped.
        whole, _, _torn = data.rpartition(b"\n")
        lines = whole.split(b"\n")
        self.end = len(whole) + 1
        for number, line in enumerate(lines[1:], start=2):
            try:
                batch = _json(line)
            except _Bad as error:
                self.fail(number, str(error))
            if not isinstance(batch, list):
                self.fail(number, f"a batch must be a list of [key, record], got {_kind(batch)}")
            for pair in cast("list[object]", batch):
                if not isinstance(pair, list) or len(cast("list[object]", pair)) != 2:
                    self.fail(number, "a batch must be a list of [key, record] pairs")
                key, record = cast("list[object]", pair)
                self.add(number, key, record)

    def read_old(self, data: bytes) -> None:
        """The previous format: one JSON document, no newline."""
        try:
            document = _json(data)
        except _Bad as error:
            self.fail(1, str(error))
        if not isinstance(document, dict):
            self.fail(1, f"not a probewise checkpoint ({FORMAT})")
        doc = cast("dict[str, object]", document)
        if doc.get("format") != OLD_FORMAT or not isinstance(doc.get("outcomes"), dict):
            self.fail(1, f"not a probewise checkpoint ({FORMAT})")
        for key, record in cast("dict[str, object]", doc["outcomes"]).items():
            self.add(1, key, record)
        self.old = True


def read(path: Path, rubric: Rubric) -> dict[Hashable, Outcome]:
    """Outcomes by prompt id from a checkpoint (empty when the file does not exist);
    changes nothing on disk."""
    if not path.exists():
        return {}
    reader = _Reader(path, rubric)
    reader.read()
    return reader.outcomes


def _fsync_folder(folder: Path) -> None:
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened (some platforms): the rename stands
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _write_all(handle: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def _fragment(outcome: Outcome) -> str:
    return json.dumps(_record(outcome), separators=(",", ":"), allow_nan=False)


def _lines(outcomes: Mapping[Hashable, Outcome], fragments: _Fragments | None = None) -> bytes:
    """One line holding ``outcomes`` (empty for none). ``fragments`` caches each
    outcome's JSON: classify() hands out the same few outcome objects again and again."""
    if not outcomes:
        return b""
    parts: list[str] = []
    for prompt_id, outcome in outcomes.items():
        fragment = _fragment(outcome) if fragments is None else fragments.of(outcome)
        parts.append(f"[{json.dumps(_key(prompt_id))},{fragment}]")
    return ("[" + ",".join(parts) + "]\n").encode("ascii")


@final
class _Fragments:
    """Outcome JSON by outcome object (held, so that its id is not reused)."""

    __slots__ = ("_known",)
    LIMIT = 4096

    def __init__(self) -> None:
        self._known: dict[int, tuple[Outcome, str]] = {}

    def of(self, outcome: Outcome) -> str:
        known = self._known.get(id(outcome))
        if known is not None and known[0] is outcome:
            return known[1]
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        fragment = _fragment(outcome)
        self._known[id(outcome)] = (outcome, fragment)
        return fragment


def _create(path: Path, outcomes: Mapping[Hashable, Outcome]) -> None:
    """Write a journal holding ``outcomes`` atomically (temporary file, fsync, rename)."""
    content = _HEADER + _lines(outcomes)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            _write_all(handle, content)
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _remove_orphans(path: Path) -> None:
    for stray in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stray.unlink(missing_ok=True)


@final
class Journal:
    """A checkpoint open for appending (see the module's docstring)."""

    def __init__(self, path: Path, handle: int) -> None:
        self.path = path
        self._handle: int | None = handle
        self._synced = time.monotonic()
        self._sync_cost = 0.0
        self._dirty = False
        self._new = False  # created by this open: the folder is fsynced with the first sync
        self._fragments = _Fragments()

    @classmethod
    def open(cls, path: Path, rubric: Rubric) -> tuple[Journal, dict[Hashable, Outcome]]:
        """Open (or create) the journal at ``path``: the outcomes it holds, and the
        journal to append to. Removes orphaned temporary files, cuts a torn last
        line, and rewrites a checkpoint of the previous format as a journal."""
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(path)
        outcomes: dict[Hashable, Outcome] = {}
        fresh = not path.exists()
        if not fresh:
            reader = _Reader(path, rubric)
            reader.read()
            outcomes = reader.outcomes
            if reader.old:
                _create(path, outcomes)
            elif path.stat().st_size != reader.end:
                os.truncate(path, reader.end)
        # A new (or emptied) journal gets its header by a plain append: a crash before
        # it is whole leaves a prefix of it, which reads as an empty journal.
        handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        journal = cls(path, handle)
        if fresh or os.fstat(handle).st_size == 0:
            _write_all(handle, _HEADER)
            journal._dirty = journal._new = True
        return journal, outcomes

    def append(self, outcomes: Mapping[Hashable, Outcome]) -> None:
        """Append one batch's outcomes as one line (fsynced as the module says)."""
        if self._handle is None:
            raise InvalidInputError(f"the checkpoint {self.path} is closed")
        data = _lines(outcomes, self._fragments)
        if not data:
            return
        _write_all(self._handle, data)
        self._dirty = True
        if time.monotonic() - self._synced >= max(SYNC_GAP, SYNC_COST_FACTOR * self._sync_cost):
            self.sync()

    def sync(self) -> None:
        """fsync what was appended."""
        if self._handle is None or not self._dirty:
            return
        start = time.monotonic()
        os.fsync(self._handle)
        if self._new:
            _fsync_folder(self.path.parent)
            self._new = False
        self._synced = time.monotonic()
        self._sync_cost = self._synced - start
        self._dirty = False

    def close(self) -> None:
        """fsync and close (idempotent)."""
        if self._handle is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._handle)
            self._handle = None
