"""Shared test settings.

The real profiler fixtures live outside the repository, in ``../shared/fixtures``
beside the checkout. One setting points at them: the ``PROBEWISE_FIXTURES``
environment variable (default: ``<repo>/../shared/fixtures``). Tests that need
them use the ``shared_fixtures`` fixture, which skips when they are absent, or
fails when ``PROBEWISE_REQUIRE_FIXTURES=1`` (as ``.ci/run`` sets).

The real labelled completions live in ``../shared/data/responses`` likewise: the
``PROBEWISE_RESPONSES`` environment variable (default:
``<repo>/../shared/data/responses``), used through the ``shared_responses`` fixture,
which skips or fails the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parent.parent

settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("ci")


def fixtures_root() -> Path:
    configured = os.environ.get("PROBEWISE_FIXTURES")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    root = fixtures_root()
    if not (root / "traces").is_dir() or not (root / "profiler_tables").is_dir():
        message = (
            f"shared fixtures not found at {root} (set PROBEWISE_FIXTURES to the folder "
            "that holds traces/ and profiler_tables/)"
        )
        if os.environ.get("PROBEWISE_REQUIRE_FIXTURES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return root


RESPONSE_SETS = ("xstest-dev.jsonl", "rbr-gold.jsonl")


def responses_root() -> Path:
    configured = os.environ.get("PROBEWISE_RESPONSES")
    if configured:
        return Path(configured)
    return REPO_ROOT.parent / "shared" / "data" / "responses"


@pytest.fixture(scope="session")
def shared_responses() -> Path:
    root = responses_root()
    if not all((root / name).is_file() for name in RESPONSE_SETS):
        message = (
            f"labelled responses not found at {root} (set PROBEWISE_RESPONSES to the folder "
            f"that holds {' and '.join(RESPONSE_SETS)})"
        )
        if os.environ.get("PROBEWISE_REQUIRE_FIXTURES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return root
