"""Seed URLs: one per line in a seeds file, or given as arguments, each checked to be an absolute
http(s) URL with a valid host name (the line it came from named when it is not)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlsplit

from crawler.errors import ConfigError

_HOST_LABEL = re.compile(r"^[\w-]+$")  # letters (IDN too), digits, '-' and '_'


def check_seed(url: str, where: str) -> str:
    bad = f"{where}: {url!r} is not an absolute http(s) URL"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ConfigError(f"{bad} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(bad)
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise ConfigError(f"{bad} (it contains a space or control character)")
    if not _valid_host(parts.hostname):
        raise ConfigError(f"{bad} (bad host name {parts.hostname!r})")
    return url


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return all(label and len(label) <= 63 and _HOST_LABEL.match(label) for label in labels)


def load_seeds(path: Path) -> list[str]:
    """One URL per line; blank lines and '#' comments are ignored."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a BOM is not part of line 1's URL
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read seeds: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: seeds file is not UTF-8 ({exc.reason})") from None
    seeds = []
    for number, line in enumerate(lines, start=1):
        url = line.split("#", 1)[0].strip()
        if url:
            seeds.append(check_seed(url, f"{path}:{number}"))
    if not seeds:
        raise ConfigError(f"{path}: no seed URLs found (one http(s) URL per line)")
    return seeds
