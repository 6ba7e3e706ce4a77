"""The shared fixture set is complete: every file PROVENANCE.md describes is present.

Skips when ../shared/fixtures is absent; fails instead under
PROBEWISE_REQUIRE_FIXTURES=1 (as .ci/run sets).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

_HEADING = re.compile(r"^## (?:\d+\. )?([^\s:]+\.(?:json\.gz|json|txt))\b", re.MULTILINE)


@pytest.mark.parametrize("folder", ["traces", "profiler_tables"])
def test_every_described_fixture_is_present(shared_fixtures: Path, folder: str) -> None:
    provenance = (shared_fixtures / folder / "PROVENANCE.md").read_text(encoding="utf-8")
    described = _HEADING.findall(provenance)
    assert described, f"no fixture headings found in {folder}/PROVENANCE.md"
    for name in described:
        path = shared_fixtures / folder / name
        assert path.is_file(), f"{folder}/{name} is described but missing"
        assert path.stat().st_size > 0, f"{folder}/{name} is empty"
