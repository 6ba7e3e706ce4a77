"""The one door to tqdm: a progress bar typed by what probewise calls on it.

Part of the shared base (like :mod:`probewise._files`). tqdm's stubs (types-tqdm) change
with each release; a release that spelt ``update``'s argument with a name pyright's own
typeshed lacked left every call ``partially unknown`` under pyright strict (types-tqdm
4.70.0.20261122 broke a fresh checkout's CI that way). The bar is therefore seen through :class:`ProgressBar`, a protocol of the five members used
here, so that the rest of the package type-checks whatever the stubs say of the others.
A bar shows counts only: no caller passes it text it did not write itself.
"""

from __future__ import annotations

from types import TracebackType
from typing import IO, Protocol, Self

__all__ = ["ProgressBar", "progress_bar"]


class ProgressBar(Protocol):
    """The members of a tqdm bar that probewise uses."""

    def update(self, n: int = 1, /) -> object: ...
    def reset(self, total: int | None = None, /) -> None: ...
    def set_postfix_str(self, s: str = "", /, refresh: bool = True) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None: ...


def progress_bar(
    *,
    total: int,
    desc: str,
    unit: str,
    file: IO[str] | None = None,
    disable: bool = False,
    leave: bool = True,
    delay: float = 0.0,
    unit_scale: bool = False,
) -> ProgressBar:
    """A tqdm bar with these settings (tqdm is imported here, on first use)."""
    from tqdm import tqdm

    bar: ProgressBar = tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=file,
        disable=disable,
        leave=leave,
        delay=delay,
        unit_scale=unit_scale,
    )
    return bar
