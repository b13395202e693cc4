"""URL canonicalisation, compact fingerprints, and guards against crawler traps."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from w3lib.url import canonicalize_url

MAX_PATH_DEPTH = 12  # real sites rarely nest deeper; calendars and session paths do
MAX_SEGMENT_REPEATS = 3  # /a/b/a/b/a/b... is a relative-link loop
MAX_QUERY_PARAMS = 6  # faceted-search explosions add parameters without adding pages
MAX_URL_LENGTH = 2048


def canonical(url: str) -> str:
    """One spelling per page: sorted query, no fragment, normalised percent-encoding."""
    return canonicalize_url(url, keep_fragments=False)


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
