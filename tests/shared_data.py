"""Where the shared real-data folder lives, and one rule for when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_VAR = "HOSTCRAWL_SHARED_DATA"


def shared_data_dir() -> Path:
    """`$HOSTCRAWL_SHARED_DATA` if set, else `../shared/data` next to the repository."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"


def require_shared_data(subdir: str = "") -> Path:
    """Return the folder, or skip the test when it is missing (fail instead under CI=true)."""
    path = shared_data_dir() / subdir
    if path.is_dir():
        return path
    message = f"shared data folder {path} is missing (set {ENV_VAR} to point at it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)
