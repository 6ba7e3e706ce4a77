"""The configs shipped with probewise (``attention/configs/``), by name (no
transformers here: the command line lists them without it)."""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["bundled_config", "bundled_configs"]


def _folder() -> Traversable:
    return importlib.resources.files("probewise.throughput.attention") / "configs"


def bundled_configs() -> tuple[str, ...]:
    """Names of the config files shipped with probewise (mirrors of published models'
    shapes), usable wherever a config path is: e.g. ``probe_masks("gemma3-27b", ...)``."""
    return tuple(
        sorted(
            entry.name.removesuffix(".json")
            for entry in _folder().iterdir()
            if entry.name.endswith(".json")
        )
    )


def bundled_config(name: str) -> dict[str, object] | None:
    """The bundled config ``name`` as a dict; ``None`` when none has that name, or when
    a file or folder of that name exists (a path wins over a bundled name)."""
    if Path(name).exists() or name not in bundled_configs():
        return None
    data: object = json.loads((_folder() / f"{name}.json").read_text(encoding="utf-8"))
    return cast("dict[str, object]", data)
