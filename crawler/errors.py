"""How a command fails: one plain line on stderr, and the extra to install when a module is missing."""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_FAILED = 1  # the crawl ran but fetched nothing, or crashed
EXIT_USAGE = 2  # bad flags, config or seeds: nothing was written
EXIT_STORAGE = 3  # the disk refused a write (full, read-only): stopped at the last commit, resumable
EXIT_INTERRUPTED = 130


class ConfigError(ValueError):
    """A config, seeds file or flag the user must fix; the message names the file and line."""


# Modules of optional extras (pyproject.toml), by the extra that installs them.
EXTRA_MODULES = {
    "redis": "redis", "scrapy_redis": "redis", "torch": "gpu", "transformers": "gpu", "tokenizers": "gpu",
    "vllm": "vllm",
}  # fmt: skip


def install_hint(module: str) -> str | None:
    """What to tell the user ("the `redis` extra (...): pip install ...") or None: not an extra's module."""
    extra = EXTRA_MODULES.get(module.split(".", 1)[0])
    return (
        None
        if extra is None
        else f"the `{extra}` extra (no module {module}): pip install 'hostcrawl[{extra}]'"
    )


def missing_extra(exc: ModuleNotFoundError) -> str:
    """The install hint for a missing extra's module; a module of no extra is a bug: raised again."""
    if (hint := install_hint(exc.name or "")) is None:
        raise exc
    return hint


def print_error(exc: BaseException | str) -> None:
    """One plain line on stderr: no markup (`[politeness]` stays), no wrapping."""
    text = " ".join(str(exc).split())
    print(f"error: {text}", file=sys.stderr, flush=True)
