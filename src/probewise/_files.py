"""Reading a user's file without hanging on it: the one door both halves and the CLI use.

Part of the shared base (like :mod:`probewise._validation`): a regular file is read
whole; a FIFO, a device, a socket or a folder is refused with
:class:`~probewise.errors.InputFileError` before anything is read.
"""

from __future__ import annotations

import os
import stat

from probewise.errors import InputFileError

__all__ = ["read_regular_file"]


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe): reading it would wait for a writer"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path``, which must be a regular file.

    A FIFO, a device, a socket or a folder is refused with
    :class:`~probewise.errors.InputFileError` without blocking: the file is opened
    non-blocking and checked with ``fstat`` before anything is read (so a FIFO with no
    writer cannot hang the reader, and there is no race between the check and the
    read). A missing file, a symlink loop and an unreadable file are the same error,
    naming ``path``.
    """
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise InputFileError("no such file", path=name) from None
    except OSError as exc:
        raise InputFileError(f"cannot open the file: {exc.strerror or exc}", path=name) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputFileError(f"not a regular file: {_file_kind(mode)}", path=name)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        if isinstance(exc, InputFileError):
            raise
        raise InputFileError(f"cannot read the file: {exc.strerror or exc}", path=name) from None
    finally:
        os.close(fd)
