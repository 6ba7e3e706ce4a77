"""Sequence lengths at the boundary: validated arrays, length files, tokenized JSONL.

Every way lengths enter probewise ends in one validated, read-only ``int64`` array.
One bad value rejects the whole input with a :class:`~probewise.errors.LengthInputError`
that names where it is (index, or file and line): a zero, a negative, a NaN, a
non-integer, a length above :data:`MAX_LENGTH` (2**40 tokens), an empty input, a
JSONL record without the field. Nothing is silently dropped, because a dropped record
is a length the waste figures never saw.

The bound keeps every figure computed from lengths exact and every array sized by the
input rather than by its values: no real sequence comes near 2**40 (about 1.1e12)
tokens, and a value that does is a corrupt record.
"""

from __future__ import annotations

import array
import codecs
import itertools
import json
import math
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast, final

import attrs
import numpy as np
import numpy.typing as npt

from probewise._extras import Extra, requires
from probewise._files import read_regular_file
from probewise._validation import MAX_LENGTH, shown_int
from probewise.errors import (
    ArgumentTypeValueError,
    InputFileError,
    InvalidInputError,
    LengthInputError,
)
from probewise.throughput.data._checks import read_only

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["MAX_LENGTH", "LengthInput", "as_lengths", "read_lengths", "tokenize_lengths"]

_BOUND_TEXT = "the bound of 2**40 = 1,099,511,627,776 tokens"


def _bad_reason(value: object) -> str | None:
    """Why ``value`` is not a usable length, or ``None`` when it is one."""
    if isinstance(value, bool | np.bool_):
        return f"a boolean ({value!r}) is not a length"
    if isinstance(value, int | np.integer):
        number = int(cast("int", value))  # an int or a numpy integer scalar
        if number <= 0:
            return f"length must be a positive integer, got {shown_int(number)}"
        if number > MAX_LENGTH:
            return f"length {shown_int(number)} is above {_BOUND_TEXT}"
        return None
    if isinstance(value, float | np.floating):
        number_f = float(cast("float", value))  # a float or a numpy floating scalar
        if math.isnan(number_f):
            return "length is NaN"
        if math.isinf(number_f):
            return "length is infinite"
        if not number_f.is_integer():
            return f"length must be an integer, got {number_f!r}"
        return _bad_reason(int(number_f))
    return f"length must be an integer, got a {type(value).__name__}"


def as_lengths(values: Sequence[int] | npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    """Validate ``values`` as sequence lengths and return them as a read-only int64 array.

    Accepts a sequence of ints or a one-dimensional array of integers (or of floats
    that are whole numbers, as pandas and JSON tools often produce). Every length must
    be a positive integer no greater than :data:`MAX_LENGTH` (2**40).

    Raises:
        LengthInputError: empty input, or the first bad value (with its index).
        InvalidInputError: a string or a multi-dimensional array instead of lengths.
    """
    if isinstance(values, str | bytes):
        raise ArgumentTypeValueError("lengths must be a sequence of ints, not a string")
    if isinstance(values, np.ndarray):
        array: npt.NDArray[np.generic] = values
    else:
        try:
            array = np.asarray(values)
        except (ValueError, TypeError, OverflowError):
            array = np.asarray(values, dtype=object)
        # numpy turns [True, 2] into ints and [1, "7"] into strings: judge such mixed
        # lists by their own elements, so the first bad one is the one named.
        if array.dtype.kind not in "iuf" or bool in set(map(type, values)):
            array = np.empty(len(values), dtype=object)
            array[:] = list(values)
    if array.ndim != 1:
        raise InvalidInputError(f"lengths must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise LengthInputError("no lengths: the input is empty")
    kind = array.dtype.kind
    if kind in "iu":
        if kind == "u" and int(array.max()) > MAX_LENGTH:
            index = int(np.argmax(array.astype(np.uint64) > np.uint64(MAX_LENGTH)))
            raise LengthInputError(
                f"length {int(array[index])} is above {_BOUND_TEXT}", index=index
            )
        out = array.astype(np.int64, copy=True)
        bad = (out <= 0) | (out > MAX_LENGTH)
        if bad.any():
            index = int(np.argmax(bad))
            reason = _bad_reason(int(out[index]))
            assert reason is not None  # the value was flagged as bad
            raise LengthInputError(reason, index=index)
        return read_only(out)
    if kind == "f":
        floats = array.astype(np.float64, copy=False)
        with np.errstate(invalid="ignore"):
            good = (
                np.isfinite(floats)
                & (floats == np.floor(floats))
                & (floats >= 1)
                & (floats <= float(MAX_LENGTH))
            )
        if not good.all():
            index = int(np.argmin(good))
            reason = (
                _bad_reason(float(floats[index]))
                or f"length {float(floats[index])!r} is out of range"
            )
            raise LengthInputError(reason, index=index)
        return read_only(floats.astype(np.int64))
    # bool, object, strings, complex: check value by value to name the first bad one.
    items: list[object] = array.tolist() if kind != "O" else list(array)
    checked: list[int] = []
    for index, item in enumerate(items):
        problem = _bad_reason(item)
        if problem is not None:
            raise LengthInputError(problem, index=index)
        checked.append(int(cast("float", item)))  # _bad_reason accepted it: a whole number
    return read_only(np.array(checked, dtype=np.int64))


@final
@attrs.frozen(kw_only=True, eq=False, repr=False)
class LengthInput:
    """Validated sequence lengths with their optional sources, as read from a file.

    ``lengths`` is a read-only ``int64`` array of positive lengths. ``source_codes``,
    when the input named a source per record, holds each record's index into
    ``source_names`` (in order of first appearance). ``path`` is the file the lengths
    came from, when they came from one.
    """

    lengths: npt.NDArray[np.int64] = attrs.field(converter=as_lengths)
    source_codes: npt.NDArray[np.int32] | None = None
    source_names: tuple[str, ...] = ()
    path: str | None = None

    def __attrs_post_init__(self) -> None:
        codes = self.source_codes
        if codes is None:
            if self.source_names:
                raise InvalidInputError("source_names given without source_codes")
            return
        if not isinstance(codes, np.ndarray):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ArgumentTypeValueError(
                f"source_codes must be an int32 numpy array, got a {type(codes).__name__}"
            )
        if codes.ndim != 1 or codes.shape[0] != self.lengths.shape[0]:
            raise InvalidInputError(
                f"source_codes must have one code per length ({self.lengths.shape[0]}), got shape {codes.shape}"
            )
        if codes.dtype != np.int32:
            raise InvalidInputError(f"source_codes must be int32, got {codes.dtype}")
        if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= len(self.source_names)):
            raise InvalidInputError("source_codes must index into source_names")
        codes.flags.writeable = False

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def __repr__(self) -> str:
        sources = f", sources={len(self.source_names)}" if self.source_codes is not None else ""
        path = f", path={self.path!r}" if self.path is not None else ""
        return f"LengthInput(n={len(self)}{sources}{path})"

    def sources(self) -> tuple[str, ...] | None:
        """Each record's source name, or ``None`` when the input named no sources."""
        if self.source_codes is None:
            return None
        names = self.source_names
        codes: list[int] = self.source_codes.tolist()
        return tuple(names[code] for code in codes)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PIECE = 1 << 22  # inflated bytes decoded and split at a time


def _inflated(data: bytes, path: Path) -> Iterator[bytes]:
    """``data`` in pieces of at most :data:`_PIECE` bytes, gunzipped (every member)
    when it starts with gzip's magic bytes: never inflated whole."""
    if data[:2] != b"\x1f\x8b":
        for start in range(0, len(data), _PIECE):
            yield data[start : start + _PIECE]
        return
    pending = data
    try:
        while pending:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while pending:
                piece = inflater.decompress(pending, _PIECE)
                pending = inflater.unconsumed_tail
                if piece:
                    yield piece
                if inflater.eof:
                    break
            if not inflater.eof:
                raise LengthInputError(
                    "the gzip stream is damaged or truncated: it ends before its end marker",
                    path=str(path),
                )
            pending = inflater.unused_data
            if pending[:2] != b"\x1f\x8b":  # gzip.decompress ignores trailing zeros too
                break
    except zlib.error as exc:
        raise LengthInputError(
            f"the gzip stream is damaged or truncated: {exc}", path=str(path)
        ) from None


def _texts(path: Path) -> Iterator[str]:
    """The file's text, piece by piece (UTF-8, a byte-order mark skipped)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset = 0
    final = False
    pieces = _inflated(read_regular_file(path), path)
    while not final:
        raw = next(pieces, None)
        final = raw is None
        try:
            text = decoder.decode(b"" if raw is None else raw, final=final)
        except UnicodeDecodeError as exc:
            raise LengthInputError(
                f"the file is not UTF-8 text (byte {max(0, offset + exc.start)})", path=str(path)
            ) from None
        offset += 0 if raw is None else len(raw)
        if text:
            yield text


def _line_batches(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The file's lines in batches, each with the number of its first line.

    Lines break at ``\n``, ``\r\n`` and ``\r`` only (not at the other characters
    :meth:`str.splitlines` breaks at, such as form feeds), so line numbers are the
    ones an editor shows. Blank lines at the end are dropped, and every batch holds a
    line that is not blank. Blank lines before one that is not (an error to every
    reader) are not kept: they come back as one empty line numbered as the first of
    them, so a file of a billion newlines costs no memory.
    """
    number = 1  # the number of the next line to split off
    blank_from: int | None = None  # the first of the blank lines not yet passed on
    tail = ""
    for text in itertools.chain(_texts(path), [None]):
        if text is None:  # the end: the tail is the last line
            parts = _LINE_BREAK.split(tail) if tail else []
        else:
            buffer = tail + text
            if not buffer.strip():  # all blank: counted, never split (a newline bomb)
                breaks = buffer.count("\n") + buffer.count("\r") - buffer.count("\r\n")
                if breaks:
                    blank_from = number if blank_from is None else blank_from
                    number += breaks
                tail = "" if breaks else buffer[:1]  # a blank line's spaces change nothing
                continue
            held = buffer.endswith("\r")  # a \r\n may be split across two pieces
            parts = _LINE_BREAK.split(buffer[:-1] if held else buffer)
            tail = parts.pop() + ("\r" if held else "")
        if not parts:
            continue
        last = next((i for i in range(len(parts) - 1, -1, -1) if parts[i].strip()), None)
        if last is None:  # all blank: numbered only if a line that is not follows
            blank_from = number if blank_from is None else blank_from
            number += len(parts)
            continue
        batch = parts[: last + 1]
        first = number
        if blank_from is not None:
            batch.insert(0, "")
            first, blank_from = blank_from, None
        yield first, batch
        if last + 1 < len(parts):
            blank_from = number + last + 1
        number += len(parts)


def _numbered(batches: Iterable[tuple[int, list[str]]]) -> Iterator[tuple[int, str]]:
    for first, lines in batches:
        yield from enumerate(lines, start=first)


def _is_jsonl(lines: Sequence[str]) -> bool:
    for line in lines:
        stripped = line.strip()
        if stripped:
            return stripped.startswith("{")
    return False


def read_lengths(
    path: str | os.PathLike[str],
    *,
    field: str = "length",
    source_field: str | None = None,
) -> LengthInput:
    """Read sequence lengths from a text file (one length per line) or a JSONL file.

    The format is told by content: a file whose first non-blank line starts with
    ``{`` is JSONL, with the length in ``field`` of each record and, when
    ``source_field`` is given, the record's source (a string or an int) in that field.
    Any other file holds one integer per line. Gzipped files are read transparently,
    and every file is inflated, decoded and split a piece at a time: what the read
    keeps is the lengths (8 bytes each), never the whole inflated text, so a small
    gzip of a gigabyte of newlines is refused in little memory.
    Trailing blank lines are ignored; a blank line anywhere else is an error, as is
    any line that is not a positive integer no greater than :data:`MAX_LENGTH`
    (2**40), or a record missing a field.

    Raises:
        InputFileError: ``path`` does not exist, or is not a regular file (a FIFO is
            refused, never read), or cannot be read.
        LengthInputError: an empty file, damaged gzip, text that is not UTF-8, or the
            first bad line (with its number).
    """
    file = Path(path)
    batches = _line_batches(file)
    head = next(batches, None)
    if head is None:
        raise LengthInputError("no lengths: the file is empty", path=str(file))
    every = itertools.chain([head], batches)
    if _is_jsonl(head[1]):
        return _read_jsonl(file, _numbered(every), field=field, source_field=source_field)
    if source_field is not None:
        raise LengthInputError(
            f"source_field={source_field!r} needs a JSONL file; this one holds one length per line",
            path=str(file),
        )
    values = array.array("q")
    for first, lines in every:
        try:
            ints = list(map(int, lines))
        except ValueError:
            ints = None
        if ints is None or not all(0 < value <= MAX_LENGTH for value in ints):
            _raise_first_bad(file, first, lines)
        values.extend(ints)
    return LengthInput(lengths=np.frombuffer(values, dtype=np.int64).copy(), path=str(file))


def _raise_first_bad(file: Path, first: int, lines: list[str]) -> NoReturn:
    for number, line in enumerate(lines, start=first):
        reason = _text_line_reason(line)
        if reason is not None:
            raise LengthInputError(reason, path=str(file), line=number)
    raise AssertionError(
        "unreachable: a bad line was not found"
    )  # pragma: no cover  # internal: the fast path failed, so a line is bad


def _text_line_reason(line: str) -> str | None:
    stripped = line.strip()
    if not stripped:
        return "blank line (one length per line expected)"
    try:
        # int() of the line itself, as read_lengths' fast path does: int() skips spaces
        # and tabs but not the separators that str.strip() also drops (\x1c-\x1f).
        value = int(line)
    except ValueError:
        shown = line.strip(" \t\n\r\f\v")
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"not an integer: {shown!r}"
    return _bad_reason(value)


def _records(
    file: Path, lines: Iterable[tuple[int, str]]
) -> Iterator[tuple[int, dict[str, object]]]:
    for number, line in lines:
        if not line.strip():
            raise LengthInputError(
                "blank line (one JSON object per line expected)", path=str(file), line=number
            )
        try:
            record: object = json.loads(line)
        except ValueError as exc:
            raise LengthInputError(
                f"invalid JSON: {exc.args[0] if exc.args else exc}", path=str(file), line=number
            ) from None
        except RecursionError:
            raise LengthInputError(
                "invalid JSON: nested too deeply to read", path=str(file), line=number
            ) from None
        if not isinstance(record, dict):
            raise LengthInputError(
                f"expected a JSON object, got {type(record).__name__}", path=str(file), line=number
            )
        yield number, cast("dict[str, object]", record)


def _source_name(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


class _SourceCoder:
    """Source names to dense int32 codes, in order of first appearance."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.values: list[int] = []

    def add(self, name: str) -> None:
        code = self.codes.setdefault(name, len(self.codes))
        self.values.append(code)

    def array(self) -> npt.NDArray[np.int32]:
        return np.array(self.values, dtype=np.int32)

    def names(self) -> tuple[str, ...]:
        return tuple(self.codes)


def _record_source(record: dict[str, object], source_field: str, file: Path, number: int) -> str:
    if source_field not in record:
        raise LengthInputError(f"record has no {source_field!r} field", path=str(file), line=number)
    name = _source_name(record[source_field])
    if name is None:
        raise LengthInputError(
            f"{source_field!r} must be a string or an int, got {type(record[source_field]).__name__}",
            path=str(file),
            line=number,
        )
    return name


def _read_jsonl(
    file: Path, lines: Iterable[tuple[int, str]], *, field: str, source_field: str | None
) -> LengthInput:
    values = array.array("q")
    coder = _SourceCoder() if source_field is not None else None
    for number, record in _records(file, lines):
        if field not in record:
            raise LengthInputError(f"record has no {field!r} field", path=str(file), line=number)
        value = record[field]
        reason = _bad_reason(value)
        if reason is not None:
            raise LengthInputError(reason, path=str(file), line=number)
        assert isinstance(value, int | float)  # _bad_reason accepted it
        values.append(int(value))
        if coder is not None and source_field is not None:
            coder.add(_record_source(record, source_field, file, number))
    return LengthInput(
        lengths=np.frombuffer(values, dtype=np.int64).copy(),
        source_codes=None if coder is None else coder.array(),
        source_names=() if coder is None else coder.names(),
        path=str(file),
    )


def _load_tokenizer(
    tokenizer: PreTrainedTokenizerBase | str | os.PathLike[str],
) -> PreTrainedTokenizerBase:
    if not isinstance(tokenizer, str | os.PathLike):
        return tokenizer
    directory = Path(tokenizer)
    if not directory.is_dir():
        raise InputFileError("no tokenizer folder here", path=str(directory))
    with requires(Extra.TORCH, "tokenize_lengths with a tokenizer directory"):
        from transformers import AutoTokenizer, PreTrainedTokenizerBase

    try:
        loaded: object = AutoTokenizer.from_pretrained(  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            str(directory), local_files_only=True
        )
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError, ...
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        # a value: the type named is the error's, not the argument's
        raise InvalidInputError(
            f"cannot load a tokenizer from {directory}: {type(exc).__name__}: {first}"
        ) from None
    if not isinstance(loaded, PreTrainedTokenizerBase):
        raise InvalidInputError(f"{directory} does not hold a transformers tokenizer")
    return loaded


def _token_counts(
    tokenizer: PreTrainedTokenizerBase, texts: list[str], *, add_special_tokens: bool
) -> list[int]:
    encoding = tokenizer(
        texts,
        add_special_tokens=add_special_tokens,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    ids: object = encoding["input_ids"]
    if not isinstance(ids, list) or len(ids) != len(texts):  # pyright: ignore[reportUnknownArgumentType]
        raise InvalidInputError("the tokenizer did not return one input_ids list per text")
    counts: list[int] = []
    for row in ids:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(row, Sequence):
            raise InvalidInputError("the tokenizer returned input_ids that are not lists")
        counts.append(len(row))  # pyright: ignore[reportUnknownArgumentType]
    return counts


class _Progress:
    """A one-line counter on stderr, shown only on a terminal (or when asked)."""

    def __init__(self, total: int, *, enabled: bool | None) -> None:
        self.total = total
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.done = 0

    def advance(self, count: int) -> None:
        self.done += count
        if self.enabled:
            share = self.done / self.total if self.total else 1.0
            sys.stderr.write(f"\rtokenizing: {self.done:,}/{self.total:,} texts ({share:.0%})")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def tokenize_lengths(
    path: str | os.PathLike[str],
    tokenizer: PreTrainedTokenizerBase | str | os.PathLike[str],
    *,
    text_field: str = "text",
    source_field: str | None = None,
    batch_size: int = 1000,
    add_special_tokens: bool = True,
    progress: bool | None = None,
) -> LengthInput:
    """Token lengths of the texts in a JSONL file, with the caller's own tokenizer.

    ``tokenizer`` is a loaded transformers tokenizer or a local directory holding one
    (loaded with ``local_files_only=True``: nothing is fetched from a hub). Texts are
    tokenized ``batch_size`` at a time; ``progress`` shows a counter on stderr (the
    default shows it only when stderr is a terminal). A text that tokenizes to no
    tokens is an error naming its line, since a zero length cannot be batched.

    Raises:
        InputFileError: ``path`` or the tokenizer folder does not exist, or ``path``
            is not a regular file.
        LengthInputError: an empty file, a bad line, a missing or non-string field.
        InvalidInputError: a non-positive ``batch_size``.
    """
    if batch_size <= 0:
        raise InvalidInputError(f"batch_size must be positive, got {batch_size}")
    file = Path(path)
    batches = _line_batches(file)
    head = next(batches, None)
    if head is None:
        raise LengthInputError("no texts: the file is empty", path=str(file))
    lines = _numbered(itertools.chain([head], batches))
    loaded = _load_tokenizer(tokenizer)
    texts: list[str] = []
    numbers: list[int] = []
    coder = _SourceCoder() if source_field is not None else None
    for number, record in _records(file, lines):
        if text_field not in record:
            raise LengthInputError(
                f"record has no {text_field!r} field", path=str(file), line=number
            )
        text = record[text_field]
        if not isinstance(text, str):
            raise LengthInputError(
                f"{text_field!r} must be a string, got {type(text).__name__}",
                path=str(file),
                line=number,
            )
        texts.append(text)
        numbers.append(number)
        if coder is not None and source_field is not None:
            coder.add(_record_source(record, source_field, file, number))
    counts: list[int] = []
    bar = _Progress(len(texts), enabled=progress)
    try:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            counts.extend(_token_counts(loaded, chunk, add_special_tokens=add_special_tokens))
            bar.advance(len(chunk))
    finally:
        bar.close()
    for number, count in zip(numbers, counts, strict=True):
        if count <= 0:
            raise LengthInputError("the text tokenizes to no tokens", path=str(file), line=number)
    return LengthInput(
        lengths=np.array(counts, dtype=np.int64),
        source_codes=None if coder is None else coder.array(),
        source_names=() if coder is None else coder.names(),
        path=str(file),
    )
