"""The optional extras, and the one-line error when one is missing.

The default install (``pip install probewise``) carries what ``classify``, the
tallies, the trace readers, lengths and the fit need. torch and transformers come
with ``probewise[torch]`` (the mask probe, the timing harness, the transformers
generator and judge, the cross-entropy tracker), matplotlib with ``probewise[plot]``,
distributed (a Dask cluster for ``probewise kernels --dask-scheduler``) with
``probewise[dask]``.
Every import of those happens inside the function that needs it, under
:class:`requires`, so that a missing one is a :class:`~probewise.errors.MissingExtraError`
naming the extra rather than a bare ``ModuleNotFoundError``::

    with requires(Extra.TORCH, "probe_masks"):
        import torch
"""

from __future__ import annotations

import enum
from types import TracebackType
from typing import Final, final

from probewise.errors import MissingExtraError

__all__ = ["Extra", "requires"]


@enum.unique
class Extra(enum.Enum):
    """An optional extra of the ``probewise`` distribution."""

    TORCH = "torch"
    PLOT = "plot"
    DASK = "dask"
    ZSTD = "zstd"


_PROVIDES: Final[dict[Extra, tuple[str, ...]]] = {
    # tokenizers comes with transformers (the demo's tiny models import it directly).
    Extra.TORCH: ("torch", "transformers", "tokenizers"),
    Extra.PLOT: ("matplotlib",),
    # distributed needs dask itself; either missing means the extra is not installed.
    Extra.DASK: ("distributed", "dask"),
    Extra.ZSTD: ("zstandard",),
}

_NEEDS: Final[dict[Extra, str]] = {
    Extra.TORCH: "torch and transformers",
    Extra.PLOT: "matplotlib",
    Extra.DASK: "distributed (Dask)",
    Extra.ZSTD: "zstandard",
}


@final
class requires:  # lower case: it reads as a statement, ``with requires(...)``
    """Turns a missing module of ``extra`` imported inside the block into a
    :class:`~probewise.errors.MissingExtraError` for ``feature``.

    Only a ``ModuleNotFoundError`` for one of the extra's own top-level modules is
    turned; any other error (a module of the extra that is installed but broken, an
    import that fails for another reason) propagates unchanged.
    """

    def __init__(self, extra: Extra, feature: str) -> None:
        self._extra = extra
        self._feature = feature

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not isinstance(error, ModuleNotFoundError):
            return
        module = (error.name or "").partition(".")[0]
        if module not in _PROVIDES[self._extra]:
            return
        extra = self._extra.value
        raise MissingExtraError(
            f"{self._feature} needs {_NEEDS[self._extra]}: pip install 'probewise[{extra}]'",
            feature=self._feature,
            extra=extra,
            module=module,
        ) from error
