"""Checks of :class:`~probewise.OpenAICompatibleGenerator`'s arguments (each error
says what is wrong, never a key or a password)."""

from __future__ import annotations

import math
import types
import urllib.parse
from collections.abc import Mapping
from typing import cast

from probewise.errors import ArgumentTypeValueError, InvalidInputError
from probewise.responses._http import shown_url
from probewise.responses.outcome import FinishReason

__all__ = ["check_key", "check_seconds", "check_text", "finish_map", "url_credentials"]

# An API key goes into a header: visible ASCII only (no space, no CR/LF, no other
# character that a header cannot carry as is).
_KEY_CHARACTERS = frozenset(chr(c) for c in range(0x21, 0x7F))


def url_credentials(value: object) -> tuple[str, str] | None:
    """Checks ``base_url``; its user info (user, password), decoded, when it has one."""
    try:
        parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
        host = None if parts is None else parts.hostname
    except ValueError:  # e.g. a port that is not a number
        parts = host = None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        shown = repr(shown_url(value)) if isinstance(value, str) else f"a {type(value).__name__}"
        raise InvalidInputError(
            f"base_url must be an http(s) URL such as http://localhost:8000/v1, got {shown}"
        )
    if "@" not in parts.netloc:
        return None
    user, _, password = parts.netloc.rpartition("@")[0].partition(":")
    return urllib.parse.unquote(user), urllib.parse.unquote(password)


def check_key(value: object) -> None:
    """Checks an API key without ever showing it."""
    if not isinstance(value, str):
        raise ArgumentTypeValueError(
            f"api_key must be a string or None, got a {type(value).__name__}"
        )
    if not value or not _KEY_CHARACTERS.issuperset(value):
        raise InvalidInputError(
            "api_key must be a non-empty string of visible ASCII characters (no space, "
            "CR or LF, nothing outside ASCII); the value is not shown"
        )


def finish_map(extra: object, defaults: Mapping[str, FinishReason]) -> Mapping[str, FinishReason]:
    """``defaults`` updated with the caller's ``extra`` entries, checked."""
    if extra is None:
        return defaults
    if not isinstance(extra, Mapping):
        raise ArgumentTypeValueError(
            f"finish_reasons must be a mapping of str to FinishReason, got a {type(extra).__name__}"
        )
    merged = dict(defaults)
    for key, value in cast("Mapping[object, object]", extra).items():
        if not isinstance(key, str) or not isinstance(value, FinishReason):
            raise ArgumentTypeValueError(
                f"finish_reasons must map str to FinishReason, got {type(key).__name__} -> "
                f"{type(value).__name__}"
            )
        merged[key] = value
    return types.MappingProxyType(merged)


def check_text(name: str, value: object, *, what: str, empty: bool = False) -> None:
    if not isinstance(value, str) or not (value or empty):
        kind = "a string" if empty else "a non-empty string"
        raise InvalidInputError(f"{name} must be {kind} ({what})")


def check_seconds(name: str, value: object, *, zero: bool) -> None:
    bound = ">= 0" if zero else "> 0"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeValueError(
            f"{name} must be a finite number {bound}, got {type(value).__name__}"
        )
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise InvalidInputError(f"{name} must be a finite number {bound}, got {value!r}")
