"""Every exception probewise raises, in one place.

The contract:

- Every error a user can cause (a bad argument, a bad file, a damaged trace, a
  missing extra) is a :class:`ProbewiseError`, so ``except ProbewiseError`` catches
  all of them, and the CLI turns each into one line on stderr with exit status 2.
- Each subclass also derives from the builtin exception that fits it
  (:class:`ValueError` for a bad value, :class:`TypeError` for a wrong type,
  :class:`OSError` for an unusable file, :class:`ImportError` for a missing extra,
  :class:`RuntimeError`, :class:`AssertionError` for a failed check), so code written
  against the builtins keeps catching them.
- A wrong type is an :class:`ArgumentTypeError`, never an :class:`InvalidInputError`
  alone: where a field has always refused any bad value with :class:`ValueError`, an
  :class:`ArgumentTypeValueError`, which is both. ``tests/test_error_contract.py``
  fails on an :class:`InvalidInputError` whose message names the type it got, unless a
  ``# a value:`` comment above it says why (a JSON document's content, a caught
  error's type).
- Messages are one line that names the field (``Class.field``), the line or the file,
  says what was wrong and what to do about it. A wrong-typed value is named by its
  type, never shown: none ever carries completion text.
- Value objects validate with ``probewise._validation``, never with
  ``attrs.validators`` (whose messages echo the value).
- The only bare builtin raises left in ``src/`` guard internal invariants (a bug in
  probewise, never reachable from input) or follow a protocol (a module's
  ``__getattr__`` raises :class:`AttributeError`); each carries a ``# internal:``
  comment saying why. ``tests/test_error_contract.py`` walks the source and fails
  on any other.

The tree (each class's builtin bases in brackets; ``tests/test_error_contract.py``
holds it to the classes below)::

    ProbewiseError (Exception)
      ArgumentTypeError (TypeError)
        ArgumentTypeValueError
      CalibrationError (ValueError)
      CrossDocumentAttentionError (AssertionError)
      FastPathLostError (AssertionError)
      InferenceServerError (RuntimeError)
        MalformedResponseError (ValueError)
          EmptyChoicesError
          ResponseTooLargeError
          UnknownFinishReasonError
        ServerStatusError
        ServerTimeoutError (TimeoutError)
      InsufficientPointsError (ValueError)
      InvalidInputError (ValueError)
        CheckpointInUseError
        CheckpointMismatchError
        InputFileError (OSError)
        LengthInputError
        MixedJobsError
        UnsupportedModelError
      MissingExtraError (ImportError)
      RubricError (ValueError)
      SealedError (TypeError)
      SpillError (OSError)
      SweepNoOpError (RuntimeError)
      TraceFormatError (ValueError)

:class:`ArgumentTypeValueError` is an :class:`InvalidInputError` too (the tree draws the
first base only): a wrong type always raises an :class:`ArgumentTypeError`, and where a
field has always refused any bad value with :class:`ValueError`, that one.

:class:`DamageKind` names what a damaged trace or table had wrong
(:attr:`TraceFormatError.kind`).
"""

from __future__ import annotations

import enum

__all__ = [
    "ArgumentTypeError",
    "ArgumentTypeValueError",
    "CalibrationError",
    "CheckpointInUseError",
    "CheckpointMismatchError",
    "CrossDocumentAttentionError",
    "DamageKind",
    "EmptyChoicesError",
    "FastPathLostError",
    "InferenceServerError",
    "InputFileError",
    "InsufficientPointsError",
    "InvalidInputError",
    "LengthInputError",
    "MalformedResponseError",
    "MissingExtraError",
    "MixedJobsError",
    "ProbewiseError",
    "ResponseTooLargeError",
    "RubricError",
    "SealedError",
    "ServerStatusError",
    "ServerTimeoutError",
    "SpillError",
    "SweepNoOpError",
    "TraceFormatError",
    "UnknownFinishReasonError",
    "UnsupportedModelError",
]


class ProbewiseError(Exception):
    """Base class of every exception raised by probewise."""


class InvalidInputError(ProbewiseError, ValueError):
    """An argument has the right type but a value the operation cannot use."""


class ArgumentTypeError(ProbewiseError, TypeError):
    """An argument has the wrong type. The message names the argument and the type it
    got, never its value (which might be completion text)."""


class ArgumentTypeValueError(ArgumentTypeError, InvalidInputError):
    """An argument has the wrong type, where the field has always refused any bad value
    with :class:`ValueError`: so it is both an :class:`ArgumentTypeError` (every wrong
    type is one) and an :class:`InvalidInputError` (code that caught ``ValueError``
    around the field keeps working), as numpy's ``AxisError`` is both a ``ValueError``
    and an ``IndexError``."""


class InputFileError(InvalidInputError, OSError):
    """A file or folder named as input cannot be used: it is missing, is not a regular
    file (a FIFO, a device, a folder where a file was expected), loops through
    symlinks, or cannot be read. ``path`` names it.

    An :class:`OSError` as well as an :class:`InvalidInputError`, so code that
    catches ``OSError`` around file reading keeps working. A FIFO is refused rather
    than read: reading one blocks until something writes to it.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{message} ({path})")
        self.path = path


class SealedError(ProbewiseError, TypeError):
    """A :class:`~probewise.Sealed` was asked to show, copy, pickle or compare its text."""


class RubricError(ProbewiseError, ValueError):
    """A :class:`~probewise.Rubric` could not be built (e.g. a rule's pattern does not compile)."""


@enum.unique
class DamageKind(enum.Enum):
    """What was wrong with a damaged trace or table (:attr:`TraceFormatError.kind`)."""

    EMPTY = "empty"
    """Nothing but whitespace."""
    NOT_JSON = "not_json"
    """The content does not start like JSON (nor like gzip)."""
    WRONG_STRUCTURE = "wrong_structure"
    """Valid JSON, but not a trace: no ``traceEvents`` array, or events that are not objects."""
    TRUNCATED_GZIP = "truncated_gzip"
    """The gzip stream ends early or is corrupt."""
    TRUNCATED = "truncated"
    """The JSON stops mid-event: the profiler was killed while writing."""
    MALFORMED = "malformed"
    """Invalid JSON inside (e.g. unquoted ``N/A``, control characters, unescaped quotes)."""
    NOT_A_TABLE = "not_a_table"
    """Text that is not a printed ``key_averages().table()``."""


class TraceFormatError(ProbewiseError, ValueError):
    """A saved profiler trace or table is damaged or in a form that cannot be read.

    ``offset`` is the byte offset (in the decompressed stream) where the damage was
    found, when it is known; ``path`` names the file, when there is one; ``kind``
    says what was wrong, when the reader knows.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        kind: DamageKind | None = None,
    ) -> None:
        where: list[str] = []
        if path is not None:
            where.append(path)
        if offset is not None:
            where.append(f"byte {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.path = path
        self.offset = offset
        self.kind = kind


class SpillError(ProbewiseError, OSError):
    """The trace reader could not write or read back its temporary spill files.

    A large trace's per-step columns go to a private temporary directory (about 6
    bytes per event; see docs/reference/chrome-trace.md): a full or read-only
    temporary directory ends the read with this error, which says where it was and
    what the system said. Point ``TMPDIR`` at a directory with room.
    """


class LengthInputError(InvalidInputError):
    """Sequence lengths could not be used: a value or a line of an input file is bad.

    ``path`` names the file and ``line`` the 1-based line number, when the lengths
    came from a file; ``index`` is the 0-based position of the bad value in the
    sequence (or of the bad record in the file). Nothing is ever dropped silently:
    one bad value rejects the whole input, naming where it is.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        index: int | None = None,
    ) -> None:
        where: list[str] = []
        if path is not None:
            where.append(path if line is None else f"{path}:{line}")
        elif line is not None:
            where.append(f"line {line}")
        if index is not None and line is None:
            where.append(f"index {index}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.path = path
        self.line = line
        self.index = index


class InsufficientPointsError(ProbewiseError, ValueError):
    """A scaling fit was given fewer than three distinct lengths."""


class SweepNoOpError(ProbewiseError, RuntimeError):
    """A bucket-size sweep produced identical batch compositions for sizes that partition differently."""


class FastPathLostError(ProbewiseError, AssertionError):
    """One or more attention layers lost SDPA's fast path (see the message for which and why)."""


class CrossDocumentAttentionError(ProbewiseError, AssertionError):
    """Packed documents can attend to each other: the block-diagonal mask was lost."""


class UnsupportedModelError(InvalidInputError):
    """The mask probe cannot run this model: its config does not build a transformers
    model that uses SDPA (e.g. Gemma2, whose softcapping SDPA does not support)."""


class MissingExtraError(ProbewiseError, ImportError):
    """A feature needs an optional extra that is not installed.

    ``feature`` names what was asked for (e.g. ``probe_masks``), ``extra`` the extra
    that provides it (``torch`` or ``plot``) and ``module`` the module that could not
    be imported. The message says what to install, e.g.
    ``probe_masks needs torch and transformers: pip install 'probewise[torch]'``.
    """

    def __init__(self, message: str, *, feature: str, extra: str, module: str) -> None:
        super().__init__(message, name=module)
        self.feature = feature
        self.extra = extra
        self.module = module


class CalibrationError(ProbewiseError, ValueError):
    """A :class:`~probewise.Calibration` cannot correct a rate: it lacks labelled rows of a
    class, or the rubric it measured is not distinguishable from chance on it."""


class MixedJobsError(InvalidInputError):
    """Trace files that cannot be ranks of one job were given together.

    Raised when the files disagree on ``distributedInfo.world_size`` or two of them
    claim the same rank; ``paths`` names the files in conflict. Pass
    ``allow_mixed_jobs=True`` (``--allow-mixed-jobs``) to sum them anyway.
    """

    def __init__(self, message: str, *, paths: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.paths = paths


class InferenceServerError(ProbewiseError, RuntimeError):
    """An inference server gave no usable completion for one prompt.

    :class:`~probewise.OpenAICompatibleGenerator` returns one per failed prompt
    (:func:`~probewise.run_arm` counts it as ``Error(kind=GENERATION)`` with the
    class as ``exception_type``); the class itself is what the connection failing
    gives. ``url`` is the endpoint (user info removed), ``attempts`` how many
    requests were made, ``status`` the last HTTP status when there was one. The
    message names those only: never a response body, which may hold a completion.
    """

    def __init__(self, message: str, *, url: str, attempts: int, status: int | None = None) -> None:
        super().__init__(f"POST {url}: {message} (attempts: {attempts})")
        self.url = url
        self.attempts = attempts
        self.status = status


class ServerStatusError(InferenceServerError):
    """The server answered with an HTTP error status (after the retries, for 408, 429 and 5xx)."""


class ServerTimeoutError(InferenceServerError, TimeoutError):
    """The server did not answer within the generator's timeout, on every attempt."""


class MalformedResponseError(InferenceServerError, ValueError):
    """The server answered 2xx with something that is not a completion (not JSON, wrong shape)."""


class EmptyChoicesError(MalformedResponseError):
    """The server answered 2xx with an empty ``choices`` list."""


class ResponseTooLargeError(MalformedResponseError):
    """The server's answer passed the generator's ``max_response_bytes``, before or after
    inflating a gzip or deflate body: it was read no further."""


class UnknownFinishReasonError(MalformedResponseError):
    """The server's ``finish_reason`` is missing, null, or not in the generator's
    ``finish_reasons`` map (``"abort"``, ``"error"``, ``"tool_calls"``, ...): the
    answer may be cut short or aborted, so it is not counted as a whole one. The
    message does not show the value; map it with ``finish_reasons=`` when it means
    one of :class:`~probewise.FinishReason`'s members."""


class CheckpointMismatchError(InvalidInputError):
    """A checkpoint belongs to another run: its generator (model, server, generation
    settings), its rubric or some of its prompts' texts differ from this run's, or it
    holds no run identity (an earlier probewise wrote it). ``differences`` says what,
    one phrase each. Delete the checkpoint (or name another) to start fresh, or pass
    ``resume_anyway=True`` (``--resume-anyway``) to keep its outcomes under this run."""

    def __init__(self, message: str, *, differences: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.differences = differences


class CheckpointInUseError(InvalidInputError):
    """Another run holds the checkpoint's lock: two writers would each count the same
    prompts and leave a journal no later run could resume."""
