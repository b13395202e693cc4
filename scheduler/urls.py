"""URL canonicalisation, compact fingerprints, and guards against crawler traps."""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from w3lib.url import canonicalize_url, url_query_cleaner

MAX_PATH_DEPTH = 12  # real sites rarely nest deeper; calendars and session paths do
MAX_SEGMENT_REPEATS = 3  # /a/b/a/b/a/b... is a relative-link loop
MAX_QUERY_PARAMS = 6  # faceted-search explosions add parameters without adding pages
MAX_URL_LENGTH = 2048
MAX_LINKS_PER_PAGE = 6000  # links followed from one page (Heritrix's max outlinks); the rest counted
PATTERN_CAP = 500  # URLs per host sharing one path shape (digits masked): calendars, session ids
CANONICAL_CACHE = 1 << 16  # navigation links repeat on every page of a host: most adds are repeats
# (and the policies look at the same queued URLs' shapes on every pick)
DIGIT_RUNS = re.compile(r"\d+")
WORDS = re.compile(r"[^\W\d_]+")
REPEATED_WORDS = re.compile(r"(?:a[-_+])+a")  # slugs of any length look alike


def redirected_back(url: str, chain: Sequence[str]) -> bool:
    """A redirect to a URL its own chain has fetched (`redirect_urls`): to itself (a self-redirect or an
    empty Location) or around a loop. Without cookies (hostcrawl sends none) fetching it again can only
    redirect the same way, so it is not queued."""
    target = canonical(url)
    return any(canonical(u) == target for u in chain)


# Session identifiers that servers put in URLs when a client takes no cookies (hostcrawl takes none):
# each response links every page again under a new id, so one site becomes endless copies of itself.
SESSION_PARAMS = frozenset(
    {"jsessionid", "phpsessid", "sessionid", "session_id", "sessid", "oscsid", "zenid"}
)
SESSION_PREFIXES = ("aspsessionid", "cfid", "cftoken")
TOKEN_SID = re.compile(r"[0-9a-fA-F]{16,}")  # `sid` is a session only as a long hex token (phpBB's)
SESSION_PATH_PARAM = re.compile(r";(?:jsessionid|sessionid|phpsessid)=[^/?#;]*", re.IGNORECASE)
SESSION_HINT = re.compile(r"sess|sid|cfid|cftoken|zenid", re.IGNORECASE)


def _session_param(name: str, value: str) -> bool:
    key = name.lower()
    if key == "sid":
        return TOKEN_SID.fullmatch(value) is not None
    return key in SESSION_PARAMS or key.startswith(SESSION_PREFIXES)


def without_session_ids(url: str) -> str:
    """The URL without the session ids a server wrote into it (`;jsessionid=...` in the path,
    `PHPSESSID=`, `sid=<hex>` and the like in the query): the page they stand for is the same page."""
    if not SESSION_HINT.search(url):
        return url
    parts = urlsplit(url)
    path = SESSION_PATH_PARAM.sub("", parts.path)
    found = {k for k, v in parse_qsl(parts.query, keep_blank_values=True) if _session_param(k, v)}
    if path == parts.path and not found:
        return url
    url = urlunsplit(parts._replace(path=path))
    return url_query_cleaner(url, sorted(found), remove=True, keep_fragments=True) if found else url


@functools.lru_cache(maxsize=CANONICAL_CACHE)
def canonical(url: str) -> str:
    """One spelling per page: no session ids, sorted query, no fragment, normalised percent-encoding."""
    return canonicalize_url(without_session_ids(url), keep_fragments=False)


@functools.lru_cache(maxsize=CANONICAL_CACHE)
def url_shape(url: str) -> str:
    """What kind of page a URL is likely to be, from its form alone: `/guide/12.html` and
    `/news/7.html` share `2:0.a`, a section index `/guide/` is `2:`, pagination `/guide/page/3` is `3:0`.
    Within a host, shapes separate articles from listings well enough to learn which pay off."""
    parts = urlsplit(url)
    segments = parts.path.split("/")[1:]
    last = segments[-1] if segments else ""
    masked = WORDS.sub("a", DIGIT_RUNS.sub("0", last.lower()))
    return f"{len(segments)}:{REPEATED_WORDS.sub('a-a', masked)}" + ("?" if parts.query else "")


def fingerprint(url: str) -> int:
    """64-bit signed fingerprint of the canonical URL (SQLite INTEGER, 8 bytes in memory)."""
    digest = hashlib.blake2b(url.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(slots=True, frozen=True)
class TrapGuard:
    max_path_depth: int = MAX_PATH_DEPTH
    max_segment_repeats: int = MAX_SEGMENT_REPEATS
    max_query_params: int = MAX_QUERY_PARAMS
    max_url_length: int = MAX_URL_LENGTH

    def reason(self, url: str) -> str | None:
        """Why a URL looks like a trap (a stats reason), or None."""
        if len(url) > self.max_url_length:
            return "url_too_long"
        parts = urlsplit(url)
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) > self.max_path_depth:
            return "path_too_deep"
        counts: dict[str, int] = {}
        for segment in segments:
            counts[segment] = counts.get(segment, 0) + 1
            if counts[segment] > self.max_segment_repeats:
                return "repeated_segment"
        if parts.query and len(parse_qsl(parts.query, keep_blank_values=True)) > self.max_query_params:
            return "too_many_params"
        return None


@dataclass(slots=True, frozen=True)
class Candidate:
    """A URL a frontier may queue: its canonical form, host, path and fingerprint."""

    url: str
    host: str
    path: str
    fp: int


def screen(url: str, guard: TrapGuard, force: bool = False) -> Candidate | str:
    """The URL canonical and checked for traps (not with `force`: a retry), or why it is not queued (a
    stats reason: `no_host`, `trap/...`). Dedup is the frontier's."""
    url = canonical(url)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host:
        return "no_host"
    trap = None if force else guard.reason(url)
    return f"trap/{trap}" if trap else Candidate(url, host, parts.path, fingerprint(url))


class PathPatterns:
    """URLs queued per (host, path with its digits masked), keyed by the pair's hash: a frontier of a
    million hosts keeps one small int per pair instead of a Counter and path strings per host (two pairs
    sharing a hash would only share a count)."""

    def __init__(self, cap: int = PATTERN_CAP) -> None:
        self.cap = cap
        self.counts: Counter[int] = Counter()

    def over_cap(self, host: str, path: str) -> bool:
        """Count one more URL of this pattern; True once the host has more than `cap` of them."""
        key = hash((host, DIGIT_RUNS.sub("N", path)))
        self.counts[key] += 1
        return self.counts[key] > self.cap
