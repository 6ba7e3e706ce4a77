"""The lazy package faces (PEP 562): a name is imported from its module on first use.

Each face (``probewise``, ``probewise.responses``, ``probewise.throughput``) writes each
public name once, as an explicit re-export in its ``if TYPE_CHECKING:`` block::

    if TYPE_CHECKING:
        from probewise.responses.outcome import Complied as Complied

Type checkers read that block (``X as X`` is the PEP 484 spelling of "exported"). At run
time the face's ``__getattr__`` reads the same block from the face's source on first
use, to learn which module defines each name, and derives ``__all__`` from it. So the
block is the only list: nothing can drift from it.

Why the classes keep their defining module as ``__module__`` (httpx and outcome set it
to their face): every module here uses ``from __future__ import annotations``, and
``typing.get_type_hints(cls)`` resolves a class's string annotations in
``sys.modules[cls.__module__]``. Pointed at a face, that lookup fails for every caller
that resolves hints (attrs, cattrs, probewise's own JSON reader), so pickles and
``type(x).__module__`` name the defining module instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import final

__all__ = ["LazyFace", "declared_names"]


def declared_names(path: str) -> dict[str, str]:
    """Each name a face's ``if TYPE_CHECKING:`` block re-exports, with its module, in order.

    Only ``from MODULE import NAME as NAME`` statements may stand in the block; anything
    else is a mistake in the face, refused with an ``ImportError`` naming the line.
    """
    import ast  # only on a face's first lookup: ``import probewise`` stays free of it

    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), filename=path)
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if node.test.id == "TYPE_CHECKING" and not node.orelse
    ]
    if len(blocks) != 1:
        raise ImportError(  # internal: a face of probewise's own is miswritten
            f"{path}: a face needs one `if TYPE_CHECKING:` block of re-exports"
        )
    found: dict[str, str] = {}
    for node in blocks[0].body:
        if not isinstance(node, ast.ImportFrom) or node.module is None or node.level:
            raise ImportError(  # internal: a face of probewise's own is miswritten
                f"{path}:{node.lineno}: only `from MODULE import X as X` here"
            )
        for alias in node.names:
            if alias.asname != alias.name or alias.name in found:
                raise ImportError(  # internal: a face of probewise's own is miswritten
                    f"{path}:{node.lineno}: {alias.name!r} must be re-exported once, as "
                    f"`{alias.name} as {alias.name}`"
                )
            found[alias.name] = node.module
    return found


@final
class LazyFace:
    """What a face's ``__getattr__`` and ``__dir__`` do, given the face's source file."""

    def __init__(self, package: str, path: str) -> None:
        self._package = package
        self._path = path
        self._module_of: dict[str, str] | None = None

    @classmethod
    def of(cls, package: str, path: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
        """The face's ``__getattr__`` and ``__dir__``."""
        face = cls(package, path)
        return face.load, face.names

    def _sources(self) -> dict[str, str]:
        if self._module_of is None:
            self._module_of = declared_names(self._path)
        return self._module_of

    def _exported(self) -> list[str]:
        """``__all__``: the declared names, and ``__version__`` where the face has one."""
        face = vars(sys.modules[self._package])
        names = list(self._sources())
        return [*names, "__version__"] if "__version__" in face else names

    def load(self, name: str) -> object:
        """Import ``name`` from its module, keep it in the face, and return it."""
        value: object
        if name == "__all__":
            value = self._exported()
        else:
            module = self._sources().get(name)
            if module is None:
                raise AttributeError(
                    f"module {self._package!r} has no attribute {name!r}"
                )  # internal: the module __getattr__ protocol
            value = getattr(importlib.import_module(module), name)
        vars(sys.modules[self._package])[name] = value
        return value

    def names(self) -> list[str]:
        """The face's ``dir()``: what it holds now and every name it exports."""
        face = vars(sys.modules[self._package])
        return sorted({*face, *self._exported()})
