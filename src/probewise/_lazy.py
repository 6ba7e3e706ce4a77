"""The lazy package faces (PEP 562): a name is imported from its module on first use.

Each face (``probewise``, ``probewise.responses``, ``probewise.throughput``) declares
its names twice: in an ``if TYPE_CHECKING:`` block, which is what type checkers and
readers see, and in ``_SOURCES``, which the runtime reads without importing anything.
tests/test_cli_startup.py holds the two, and ``__all__``, to the same names.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import final

__all__ = ["LazyFace"]


@final
class LazyFace:
    """What a face's ``__getattr__`` and ``__dir__`` do, given where each name lives."""

    def __init__(self, package: str, sources: Mapping[str, tuple[str, ...]]) -> None:
        self._package = package
        self._module_of = {name: module for module, names in sources.items() for name in names}

    @classmethod
    def of(
        cls, package: str, sources: Mapping[str, tuple[str, ...]]
    ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
        """The face's ``__getattr__`` and ``__dir__``."""
        face = cls(package, sources)
        return face.load, face.names

    def load(self, name: str) -> object:
        """Import ``name`` from its module, keep it in the face, and return it."""
        module = self._module_of.get(name)
        if module is None:
            raise AttributeError(
                f"module {self._package!r} has no attribute {name!r}"
            )  # internal: the module __getattr__ protocol
        value: object = getattr(importlib.import_module(module), name)
        vars(sys.modules[self._package])[name] = value
        return value

    def names(self) -> list[str]:
        """The face's ``dir()``: what it holds now and every name it exports."""
        face = vars(sys.modules[self._package])
        exported: list[str] = face["__all__"]
        return sorted({*face, *exported})
