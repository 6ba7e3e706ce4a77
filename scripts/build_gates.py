"""Regenerate src/probewise/responses/_default_gates.json from the shipped rules.

Usage: ``python scripts/build_gates.py`` (no arguments). Derives the gate of every
rule in probewise/responses/default_rules.py with the gate compiler in
probewise/responses/_gates.py and writes them, keyed by pattern and sorted, so the
same rules always give the same file. Run it after changing a shipped pattern;
tests/responses/test_shipped_gates.py fails until you do.
"""

from __future__ import annotations

from pathlib import Path

from probewise.responses import _gates
from probewise.responses.default_rules import SHIPPED


def main() -> None:
    target = Path(_gates.__file__).with_name(_gates.SHIPPED_GATES)
    text = _gates.gates_document(SHIPPED)
    if target.exists() and target.read_text() == text:
        print(f"{target}: up to date")
        return
    target.write_text(text)
    print(f"{target}: written ({len(text):,} characters)")


if __name__ == "__main__":
    main()
