"""How a command fails: one plain line on stderr, and the extra to install when a module is missing."""

from __future__ import annotations

import sys

# Modules of optional extras (pyproject.toml), by the extra that installs them.
EXTRA_MODULES = {
    "redis": "redis", "scrapy_redis": "redis", "torch": "gpu", "transformers": "gpu", "tokenizers": "gpu",
    "vllm": "vllm",
}  # fmt: skip


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """What to tell the user ("the `redis` extra (...): pip install ...") or None: not an extra's module."""
    extra = EXTRA_MODULES.get((exc.name or "").split(".", 1)[0])
    return None if extra is None else f"the `{extra}` extra ({exc}): pip install 'hostcrawl[{extra}]'"


def print_error(exc: BaseException | str) -> None:
    """One plain line on stderr: no markup (`[politeness]` stays), no wrapping."""
    text = " ".join(str(exc).split())
    print(f"error: {text}", file=sys.stderr, flush=True)
