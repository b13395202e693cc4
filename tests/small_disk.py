"""A real small filesystem for full-disk and read-only tests: a tmpfs of a few MB, mounted for one test.

A tmpfs answers ENOSPC when full and EROFS once remounted read-only, as a real disk does; it needs
root (the CI container runs as root). Elsewhere the test is skipped with why, and fails under CI=true.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True, timeout=30)


@contextmanager
def small_disk(path: Path, size_kib: int) -> Iterator[SmallDisk]:
    path.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        message = f"cannot mount a small tmpfs at {path} (needs root): {detail}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


class SmallDisk:
    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size_kib: int) -> None:
        """Room again (tmpfs grows in place, files kept): what a user freeing space does."""
        _mount("-o", f"remount,size={size_kib}k", str(self.path))

    def read_only(self) -> None:
        _mount("-o", "remount,ro", str(self.path))

    def writable(self) -> None:
        _mount("-o", "remount,rw", str(self.path))

    def free_kib(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize // 1024
