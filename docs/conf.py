"""Sphinx configuration: furo theme, MyST markdown, API reference from docstrings."""

from __future__ import annotations

project = "probewise"
author = "probewise developers"
copyright = "2026, probewise developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "probewise"
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
suppress_warnings = ["myst.xref_missing"]
