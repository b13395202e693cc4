"""Pages that change between epochs, and the validators (ETag, Last-Modified) conditional GETs test.

The web of epoch 0 is the one the seed describes. Advancing to epoch e changes each HTML page in each epoch
1..e with probability `change_share` (decided by a hash, so the same config changes the same pages); a
changed page carries a visible revision note in its body (robots.txt and sitemaps do not change). Every 200
answer gets an ETag (a hash of the body it sends) and a Last-Modified date (a base date plus the page's
number of revisions, in days), and a request whose If-None-Match or If-Modified-Since still matches gets a
bodiless 304; hosts outside `validators_share` send neither, as many real servers do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

from crawler.testweb.config import TestWebConfig
from crawler.testweb.site import Rendered

BASE_DATE = datetime(2025, 1, 1, tzinfo=UTC)
HASH_SPACE = 2**64


def revisions(cfg: TestWebConfig, host: str, path: str) -> int:
    """In how many of the epochs 1..cfg.epoch this page changed."""
    changed = 0
    for epoch in range(1, cfg.epoch + 1):
        digest = hashlib.blake2b(f"{cfg.seed}|{host}|{path}|{epoch}".encode(), digest_size=8).digest()
        changed += int.from_bytes(digest, "big") < cfg.change_share * HASH_SPACE
    return changed


def with_validators(cfg: TestWebConfig, host: str, path: str, r: Rendered) -> Rendered:
    """A 200 answer as of the configured epoch, with its ETag and Last-Modified."""
    if r.status != 200 or r.effect is not None:
        return r
    html = r.headers.get("Content-Type", "").startswith("text/html")
    version = revisions(cfg, host, path) if cfg.epoch and html else 0  # robots.txt, sitemaps stay as they are
    if version:
        note = f'<p class="revision">Updated: revision {version} of this page.</p></body>'.encode()
        r.body = r.body.replace(b"</body>", note, 1) if b"</body>" in r.body else r.body + note
    if sends_validators(cfg, host):
        r.headers["ETag"] = '"' + hashlib.sha1(r.body).hexdigest()[:20] + '"'
        r.headers["Last-Modified"] = format_datetime(BASE_DATE + timedelta(days=version), usegmt=True)
    return r


def sends_validators(cfg: TestWebConfig, host: str) -> bool:
    """Does this host answer with validators (the share `validators_share`, chosen by a hash of its name)?
    The others answer every GET in full, so a revisit can only compare payload digests."""
    digest = hashlib.blake2b(f"{cfg.seed}|{host}|validators".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < cfg.validators_share * HASH_SPACE


def not_modified(request_headers: Mapping[str, str], r: Rendered) -> bool:
    """Does a conditional GET still match (If-None-Match first, as RFC 9110 says)?"""
    etag = r.headers.get("ETag")
    if etag is None:
        return False
    if_none_match = request_headers.get("If-None-Match")
    if if_none_match is not None:
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        return etag in tags or "*" in tags
    since = request_headers.get("If-Modified-Since")
    if since is None:
        return False
    try:
        return parsedate_to_datetime(r.headers["Last-Modified"]) <= parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False


def validators(r: Rendered) -> dict[str, str]:
    return {k: r.headers[k] for k in ("ETag", "Last-Modified") if k in r.headers}
