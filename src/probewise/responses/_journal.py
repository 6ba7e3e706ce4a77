"""The checkpoint of a run: an append-only journal of outcomes by prompt id, never text.

The file is JSON lines, each followed by a tab and the CRC-32 of its JSON in eight hex
digits (so an edited or damaged line is found, never used). The first line is the
header: ``{"format": "probewise.arm-journal/3", "run": {...}}``, the run's identity
(what the run generates with: see :class:`RunIdentity`). Every other line is one
batch, a JSON array of ``[key, record]`` pairs. A key is the prompt id tagged with its
type (``s:`` and the string, or ``i:`` and the int in canonical decimal, at most
:data:`MAX_INT_DIGITS` digits). A record names the bucket (``b``), the truncation flag
(``t``), the decided flag (``d``: written only when true, so that a record without
it reads as before and an earlier probewise refuses a record with it by its fields),
the rule ids (``r``, or ``ev`` for axis evidence; resolved against the rubric
on resume), the provider flag (``p``), the error kind (``k``) and a digest of the
prompt's text (``h``: 16 hex digits of its SHA-256, or null for a prompt that is not
text or JSON), and nothing else.

Resuming is bound to the run: :meth:`Journal.open` compares the header's generator
(model, base URL without user info, generation settings) and rubric fingerprint, and
each stored prompt's digest, with the run's, and refuses any difference with a
:class:`~probewise.errors.CheckpointMismatchError` naming what differs. Outcomes
cannot be classified again under another rubric (no text is kept), so a rubric
change is refused like the rest. ``anyway=True`` keeps the stored outcomes and
rewrites the journal under the new identity. A checkpoint of an earlier format holds
no identity and is refused the same way (and rewritten, with ``anyway=True``).

One writer at a time: the open journal holds an advisory ``fcntl.flock`` on the file
(where the platform has ``fcntl``); a second run on the same checkpoint gets a
:class:`~probewise.errors.CheckpointInUseError` at once. A checkpoint must be a
regular file (or not exist yet).

Writing: the file is opened for appending (a new one gets its header line first:
a crash before that line is whole leaves a file with no whole line, which reads as an
empty journal); each batch is one ``write`` of one whole line, so a batch costs
O(batch), whatever the run's length. The line is in the kernel as soon as the write
returns, so a killed process loses no batch it finished. It is fsynced at once when
the last fsync is at least :data:`SYNC_GAP` seconds (or ten times that fsync's own
duration) old, and always when the run ends or stops: batches that come faster than
that share one fsync (a group commit), so a power cut or an OS crash can cost the
batches of the last fraction of a second. Those are generated again on resume, never
counted twice.

Reading: a last line without its newline is a write torn by a crash: it is skipped
(and cut off before the next append). Anything else that is wrong (a checksum that
does not match, a bad key, a repeated prompt id, a value of the wrong type, NaN, a
nesting, a rule the rubric does not hold) is an :class:`~probewise.InvalidInputError`
naming the file and the line. Checkpoints of the two earlier formats (one JSON
document, ``probewise.arm-checkpoint/1``; and journal lines without checksums or
digests, ``probewise.arm-journal/2``) are still read. Temporary files that a killed
run left beside the checkpoint are removed when it is opened.
"""

from __future__ import annotations

import glob
import json
import os
import re
import stat
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import NoReturn, cast, final

from probewise.errors import (
    ArgumentTypeValueError,
    CheckpointInUseError,
    CheckpointMismatchError,
    InputFileError,
    InvalidInputError,
)
from probewise.responses._run_identity import (
    RunIdentity,
    Scalar,
    differences,
    is_scalar,
    rubric_fingerprint,
)
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    Outcome,
    Refused,
    decided_copy,
)
from probewise.responses.rubric import Rubric
from probewise.responses.rules import Rule

FORMAT = "probewise.arm-journal/3"
V2_FORMAT = "probewise.arm-journal/2"
OLD_FORMAT = "probewise.arm-checkpoint/1"
MAX_INT_DIGITS = 100
"""Int prompt ids have at most this many decimal digits (so reading one is cheap)."""
SYNC_GAP = 0.2
"""Seconds: a batch written this long after the last fsync is fsynced at once."""
SYNC_COST_FACTOR = 10
"""... or this many times the last fsync's duration, when that is longer (so that
fsyncs take at most about a tenth of a fast run's time)."""

_V2_HEADER = (json.dumps({"format": V2_FORMAT}) + "\n").encode("ascii")
_V3_START = json.dumps({"format": FORMAT})[:-1].encode("ascii")  # the header's first bytes
_CHECKSUM = re.compile(rb"[0-9a-f]{8}")
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
        raise ArgumentTypeValueError(
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
    record = _fields(outcome)
    if not isinstance(outcome, Error) and outcome.decided:
        record["d"] = True  # (written only when set: a journal without it reads as before)
    return record


def _fields(outcome: Outcome) -> dict[str, object]:
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
    outcome = _read_outcome(value, rubric)
    if isinstance(value, dict) and cast("dict[str, object]", value).get("d") is True:
        return decided_copy(outcome)  # (an error record with "d" failed above)
    return outcome


def _read_outcome(value: object, rubric: Rubric) -> Outcome:
    if not isinstance(value, dict):
        _fail(f"a record must be an object, got {_kind(value)}")
    record = cast("dict[str, object]", value)
    bucket = record.get("b")
    fields = _FIELDS.get(bucket) if isinstance(bucket, str) else None
    if fields is None:
        _fail(f"field 'b' must name a bucket ({', '.join(_FIELDS)})")
    decided = record.get("d", False) is True and bucket != "error"
    if record.keys() != (fields | {"d"} if decided else fields):
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


def _checked(line: bytes) -> bytes:
    """A v3 line's JSON, once its checksum is found to match."""
    payload, tab, checksum = line.rpartition(b"\t")
    if not tab or _CHECKSUM.fullmatch(checksum) is None:
        _fail("the line has no checksum (a tab and 8 hex digits at its end)")
    if int(checksum, 16) != zlib.crc32(payload):
        _fail("the line's checksum does not match: it was edited or damaged")
    return payload


def _identity(header: object) -> RunIdentity:
    run = cast("dict[str, object]", header).get("run") if isinstance(header, dict) else None
    if not isinstance(run, dict):
        _fail("the header has no run identity")
    fields = cast("dict[str, object]", run)
    generator, rubric = fields.get("generator"), fields.get("rubric")
    if not isinstance(generator, dict) or not isinstance(rubric, str):
        _fail("the header's run identity needs a generator object and a rubric string")
    items = cast("dict[str, object]", generator).items()
    if not all(is_scalar(value) for _, value in items):
        _fail("the header's generator holds a value that is not a JSON scalar")
    return RunIdentity(
        generator=tuple(sorted(cast("dict[str, Scalar]", dict(items)).items())), rubric=rubric
    )


@final
class _Reader:
    """Outcomes read from a checkpoint file, and where its whole lines end."""

    def __init__(self, path: Path, rubric: Rubric) -> None:
        self.path = path
        self.rubric = rubric
        self.outcomes: dict[Hashable, Outcome] = {}
        self.digests: dict[Hashable, str | None] = {}
        self.lines: dict[Hashable, int] = {}
        self.identity: RunIdentity | None = None  # None: an earlier format, no identity
        self.version = 3
        self.end = 0  # the byte length of the whole lines

    def fail(self, line: int, message: str) -> NoReturn:
        raise InvalidInputError(f"{self.path}:{line}: {message}") from None

    def add(self, line: int, key: object, record: object) -> None:
        try:
            prompt_id = _unkey(key)
            prompt_hash: str | None = None
            if self.version == 3:
                if not isinstance(record, dict) or "h" not in record:
                    _fail("a record must be an object with a prompt digest 'h'")
                fields = dict(cast("dict[str, object]", record))
                stored = fields.pop("h")
                if stored is not None and not isinstance(stored, str):
                    _fail(f"field 'h' must be a string or null, got {_kind(stored)}")
                prompt_hash, record = stored, fields
            outcome = _outcome(record, self.rubric)
        except _Bad as error:
            self.fail(line, str(error))
        first = self.lines.get(prompt_id)
        if first is not None:
            shown = _short(key) if isinstance(key, str) else key
            self.fail(line, f"prompt id {shown!r} repeats the one on line {first}")
        self.lines[prompt_id] = line
        self.outcomes[prompt_id] = outcome
        self.digests[prompt_id] = prompt_hash

    def header(self, data: bytes) -> bytes | None:
        """Reads the header (setting the version and identity); the rest of ``data``
        after it, or ``None`` when ``data`` is no journal (an old checkpoint, or
        nothing whole yet)."""
        first, newline, rest = data.partition(b"\n")
        if not newline:  # no whole line: killed while the header was written, or v1
            return None
        if first.startswith(_V3_START):
            try:
                self.identity = _identity(_json(_checked(first)))
            except _Bad as error:
                self.fail(1, str(error))
            return rest
        try:
            header = _json(first)
        except _Bad:
            header = None
        if header == {"format": V2_FORMAT}:
            self.version = 2
            return rest
        return None

    def read(self, before_records: Callable[[_Reader], None] | None = None) -> None:
        """Reads the file; ``before_records`` is called once the header is read."""
        data = _read_bytes(self.path)
        if (
            not data
            or _V2_HEADER.startswith(data)
            or (b"\n" not in data and (_V3_START.startswith(data) or data.startswith(_V3_START)))
        ):  # created, and killed before the header was whole
            self.end = 0
            return
        rest = self.header(data)
        if rest is None:
            self.version = 1
            records = self.old_records(data)
            if before_records is not None:
                before_records(self)
            for old_key, old_record in records.items():
                self.add(1, old_key, old_record)
            return
        if before_records is not None:
            before_records(self)
        # A last line without its newline is a torn write: skipped.
        whole, _, _torn = data.rpartition(b"\n")
        self.end = len(whole) + 1
        lines = whole.split(b"\n")
        for number, line in enumerate(lines[1:], start=2):
            try:
                batch = _json(_checked(line) if self.version == 3 else line)
            except _Bad as error:
                self.fail(number, str(error))
            if not isinstance(batch, list):
                self.fail(number, f"a batch must be a list of [key, record], got {_kind(batch)}")
            for pair in cast("list[object]", batch):
                if not isinstance(pair, list) or len(cast("list[object]", pair)) != 2:
                    self.fail(number, "a batch must be a list of [key, record] pairs")
                key, record = cast("list[object]", pair)
                self.add(number, key, record)

    def old_records(self, data: bytes) -> dict[str, object]:
        """The records of the first format: one JSON document, no newline."""
        try:
            document = _json(data)
        except _Bad as error:
            self.fail(1, str(error))
        if not isinstance(document, dict):
            self.fail(1, f"not a probewise checkpoint ({FORMAT})")
        doc = cast("dict[str, object]", document)
        if doc.get("format") != OLD_FORMAT or not isinstance(doc.get("outcomes"), dict):
            self.fail(1, f"not a probewise checkpoint ({FORMAT})")
        return cast("dict[str, object]", doc["outcomes"])


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():  # a FIFO would block, a folder cannot be read
        raise InputFileError("the checkpoint is not a regular file", path=str(path))
    try:
        return path.read_bytes()
    except OSError as error:
        raise InputFileError(
            f"cannot read the checkpoint: {error.strerror}", path=str(path)
        ) from None


def read(path: Path, rubric: Rubric) -> dict[Hashable, Outcome]:
    """Outcomes by prompt id from a checkpoint (empty when the file does not exist);
    changes nothing on disk and checks no run identity."""
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


def _line(payload: bytes) -> bytes:
    """``payload`` as a journal line: a tab, its CRC-32 in 8 hex digits, a newline."""
    return payload + b"\t" + f"{zlib.crc32(payload):08x}\n".encode("ascii")


def _header(identity: RunIdentity) -> bytes:
    document = {"format": FORMAT, "run": identity.to_json()}
    return _line(json.dumps(document, ensure_ascii=True, allow_nan=False).encode("ascii"))


def _lines(
    outcomes: Mapping[Hashable, Outcome],
    digests: Mapping[Hashable, str | None],
    fragments: _Fragments | None = None,
) -> bytes:
    """One line holding ``outcomes`` (empty for none), each with its prompt's digest.
    ``fragments`` caches each outcome's JSON: classify() hands out the same few outcome
    objects again and again."""
    if not outcomes:
        return b""
    parts: list[str] = []
    for prompt_id, outcome in outcomes.items():
        fragment = _fragment(outcome) if fragments is None else fragments.of(outcome)
        prompt_hash = json.dumps(digests.get(prompt_id))
        parts.append(f'[{json.dumps(_key(prompt_id))},{fragment[:-1]},"h":{prompt_hash}}}]')
    return _line(("[" + ",".join(parts) + "]").encode("ascii"))


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


def _create(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` atomically (temporary file, fsync, rename)."""
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


def _lock(handle: int) -> bool:
    """Takes the advisory lock on ``handle`` at once; False when another holds it."""
    if sys.platform == "win32":  # no fcntl: one writer is the caller's to ensure
        return True
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a file system without locks: unlocked, as before
        return True
    return True


def _locked(path: Path) -> int:
    """``path`` opened for reading and appending (created if missing), locked."""
    shown = str(path)
    for _ in range(3):
        if path.exists() and not path.is_file():  # a FIFO would block the open
            raise InputFileError("the checkpoint is not a regular file", path=shown)
        try:
            handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise InputFileError(
                f"cannot open the checkpoint: {error.strerror}", path=shown
            ) from None
        if not stat.S_ISREG(os.fstat(handle).st_mode) or not _lock(handle):
            regular = stat.S_ISREG(os.fstat(handle).st_mode)
            os.close(handle)
            if not regular:
                raise InputFileError("the checkpoint is not a regular file", path=shown)
            raise CheckpointInUseError(
                f"the checkpoint {path} is in use by another run (it holds the file's lock): "
                "wait for it, or name another checkpoint"
            )
        try:
            same = os.stat(path).st_ino == os.fstat(handle).st_ino
        except OSError:
            same = False
        if same:
            return handle
        os.close(handle)  # replaced while it was opened (a resume rewriting it): again
    raise CheckpointInUseError(f"the checkpoint {path} keeps being replaced by another run")


def _mismatch(path: Path, found: list[str]) -> NoReturn:
    shown = "; ".join(found[:4]) + ("; ..." if len(found) > 4 else "")
    raise CheckpointMismatchError(
        f"the checkpoint {path} belongs to another run: {shown}. Delete it (or name another "
        "checkpoint) to start fresh, or resume anyway (resume_anyway=True, --resume-anyway) "
        "to keep its outcomes under this run",
        differences=tuple(found),
    )


def _changed_prompts(
    stored: Mapping[Hashable, str | None], current: Mapping[Hashable, str | None]
) -> list[str]:
    changed = [
        key
        for key, old in stored.items()
        if old is not None and current.get(key) is not None and current[key] != old
    ]
    if not changed:
        return []
    first = changed[0]
    shown = repr(_short(first)) if isinstance(first, str) else repr(first)
    return [f"{len(changed)} prompts' texts differ (the first: id {shown})"]


@final
class Journal:
    """A checkpoint open for appending (see the module's docstring)."""

    def __init__(self, path: Path, handle: int, digests: Mapping[Hashable, str | None]) -> None:
        self.path = path
        self._handle: int | None = handle
        self._digests = digests
        self._synced = time.monotonic()
        self._sync_cost = 0.0
        self._dirty = False
        self._new = False  # created by this open: the folder is fsynced with the first sync
        self._fragments = _Fragments()

    @classmethod
    def open(
        cls,
        path: Path,
        rubric: Rubric,
        *,
        identity: RunIdentity | None = None,
        digests: Mapping[Hashable, str | None] | None = None,
        anyway: bool = False,
    ) -> tuple[Journal, dict[Hashable, Outcome]]:
        """Open (or create) the journal at ``path``, locked: the outcomes it holds, and
        the journal to append to.

        ``identity`` is this run's (default: no generator, ``rubric``'s fingerprint)
        and ``digests`` its prompts' digests by id. A stored identity or prompt digest
        that differs raises :class:`~probewise.errors.CheckpointMismatchError`, unless
        ``anyway``: the journal is then rewritten under this run's identity. Removes
        orphaned temporary files, cuts a torn last line, and rewrites a checkpoint of
        an earlier format."""
        run = (
            RunIdentity(generator=(), rubric=rubric_fingerprint(rubric))
            if identity is None
            else identity
        )
        prompts: Mapping[Hashable, str | None] = {} if digests is None else digests
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputFileError(
                f"cannot make the checkpoint's folder: {error.strerror}", path=str(path)
            ) from None
        _remove_orphans(path)
        handle = _locked(path)
        try:
            return cls._opened(path, handle, rubric, run, prompts, anyway=anyway)
        except BaseException:
            os.close(handle)
            raise

    @classmethod
    def _opened(
        cls,
        path: Path,
        handle: int,
        rubric: Rubric,
        run: RunIdentity,
        prompts: Mapping[Hashable, str | None],
        *,
        anyway: bool,
    ) -> tuple[Journal, dict[Hashable, Outcome]]:
        found: list[str] = []

        def check(reader: _Reader) -> None:
            if reader.identity is None:
                found.append("it holds no run identity (written by an earlier probewise)")
            else:
                found.extend(differences(reader.identity, run))
            if found and not anyway:  # before the records: their rules may not resolve
                _mismatch(path, found)

        reader = _Reader(path, rubric)
        reader.read(check)
        found.extend(_changed_prompts(reader.digests, prompts))
        if found and not anyway:
            _mismatch(path, found)
        outcomes = reader.outcomes
        if found or (reader.version != 3 and outcomes):
            # Adopted (or an earlier format): rewritten whole under this run.
            _create(path, _header(run) + _lines(outcomes, prompts))
            fresh = _locked(path)
            os.close(handle)
            return cls(path, fresh, prompts), outcomes
        if os.fstat(handle).st_size != reader.end:
            os.ftruncate(handle, reader.end)
        journal = cls(path, handle, prompts)
        if reader.end == 0:
            # A new (or emptied) journal gets its header by a plain append: a crash
            # before it is whole leaves no whole line, which reads as an empty journal.
            _write_all(handle, _header(run))
            journal._dirty = journal._new = True
        return journal, outcomes

    def append(self, outcomes: Mapping[Hashable, Outcome]) -> None:
        """Append one batch's outcomes as one line (fsynced as the module says)."""
        if self._handle is None:
            raise InvalidInputError(f"the checkpoint {self.path} is closed")
        data = _lines(outcomes, self._digests, self._fragments)
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
        """fsync and close (idempotent); the lock goes with the handle."""
        if self._handle is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._handle)
            self._handle = None
