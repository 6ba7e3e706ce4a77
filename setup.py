"""Builds the trace reader's optional compiled part; everything else is in pyproject.toml.

``probewise.throughput.readers._scan`` (one C file, no dependency beyond CPython's API)
reads runs of Chrome trace events about twice as fast as the pure-Python paths. It is
``optional``: where there is no C compiler the install goes on without it and the reader
uses its pure-Python paths, with the same results (docs/reference/chrome-trace.md).
"""

from __future__ import annotations

import os

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "probewise.throughput.readers._scan",
            ["src/probewise/throughput/readers/_scan.c"],
            libraries=["m"] if os.name == "posix" else [],
            optional=True,
        )
    ]
)
