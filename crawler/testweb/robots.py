"""robots.txt of test-web hosts: generated ones, and real files with our rules merged in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from protego import Protego

GENERIC_UA = "hostcrawl/0.1 (+https://example.org/bot)"
PRIVATE_PREFIX = "/private/"
SEARCH_PREFIX = "/search"
SKIP_NAMES = ("LICENSE", "README")
PROBE_DELAY = 0.37  # a value no real file uses, to check that our appended rules win


@dataclass(frozen=True, slots=True)
class RealRobots:
    """One real robots.txt that our appended `User-agent: *` group provably controls."""

    name: str
    body: bytes  # the original bytes minus Sitemap lines (they name hosts we do not serve)
    disallow: tuple[str, ...]  # Disallow values of the `*` groups, as written
    has_delay: bool  # the file sets a crawl delay our generic UA would obey


def star_disallows(text: str) -> tuple[str, ...]:
    """Disallow values in groups naming `*`, grouped the way protego groups records."""
    out: list[str] = []
    star = False
    prev: str | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        field, value = (s.strip() for s in line.split(":", 1))
        field = field.lower().replace(" ", "-")
        if field in ("user-agent", "useragent"):
            if prev is not None and prev != "user-agent":
                star = False
            star = star or value == "*"
            prev = "user-agent"
        elif field not in ("sitemap", "host"):
            prev = field
            if star and field == "disallow" and value and value not in out:
                out.append(value)
    return tuple(out)


def _strip_sitemaps(body: bytes) -> bytes:
    lines = body.splitlines(keepends=True)
    return b"".join(ln for ln in lines if not ln.lstrip().lower().startswith(b"sitemap:"))


def merged(body: bytes, host: str, delay: float | None) -> bytes:
    """A real file followed by our group; protego merges same-agent groups, last delay wins."""
    tail = [
        "",
        "# hostcrawl test web: rules added to the original file",
        "User-agent: *",
        f"Disallow: {PRIVATE_PREFIX}",
    ]
    if delay is not None:
        tail.append(f"Crawl-delay: {delay:g}")
    tail.append(f"Sitemap: http://{host}/sitemap.xml")
    return body.rstrip(b"\r\n") + b"\n" + "\n".join(tail).encode("ascii") + b"\n"


def load_real_robots(folder: Path | None) -> list[RealRobots]:
    """Real files whose merged form protego reads as intended for GENERIC_UA; others are skipped."""
    if folder is None:
        return []
    pool = []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.name.startswith(SKIP_NAMES) or path.suffix == ".md":
            continue
        body = _strip_sitemaps(path.read_bytes())
        text = body.decode("utf-8", errors="ignore")
        probe = Protego.parse(merged(body, "h.example", PROBE_DELAY).decode("utf-8", "ignore"))
        if probe.crawl_delay(GENERIC_UA) != PROBE_DELAY:
            continue
        if probe.can_fetch(f"http://h.example{PRIVATE_PREFIX}x", GENERIC_UA):
            continue
        own = Protego.parse(merged(body, "h.example", None).decode("utf-8", "ignore"))
        pool.append(
            RealRobots(
                name=path.name,
                body=body,
                disallow=star_disallows(text),
                has_delay=own.crawl_delay(GENERIC_UA) is not None,
            )
        )
    return pool


def generated(host: str, delay: float | None, disallow: tuple[str, ...], badbot: bool) -> bytes:
    """A typical small robots.txt."""
    lines = [f"# robots.txt for {host}", "User-agent: *"]
    lines += [f"Disallow: {d}" for d in disallow]
    if delay is not None:
        lines.append(f"Crawl-delay: {delay:g}")
    if badbot:
        lines += ["", "User-agent: BadBot", "Disallow: /"]
    lines += ["", f"Sitemap: http://{host}/sitemap.xml", ""]
    return "\n".join(lines).encode("ascii")
