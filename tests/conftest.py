"""Shared fixtures: where the artifacts' public files live (../shared beside the repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    return Path(os.environ.get("HETSCHED_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The artifacts' data and fidelity cases. CI always has them; a missing folder fails there."""
    path = _shared()
    if not (path / "fidelity").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"shared folder not found at {path} (set HETSCHED_SHARED)")
        pytest.skip(f"shared folder not found at {path}")
    return path


@pytest.fixture(scope="session")
def gavel_table():
    from hetsched import load_throughputs

    return load_throughputs("gavel_simulation")
