"""Redirects to anything but http(s): kept as the 3xx they are, never followed, and counted.

Scrapy 2.19's RedirectMiddleware already leaves `file:` and `ftp:` targets alone, but it builds the
redirected Request first, and a `Location: javascript:...` (or `mailto:`, `data:`: no `//`) makes that
constructor raise ValueError, so the page ended as `fetch/failed/exception/ValueError`. This runs just
before it (process_response goes from the highest order down) and tells it not to redirect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urljoin, urlsplit

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
FOLLOWED_SCHEMES = frozenset(("http", "https"))


def redirect_scheme(request_url: str, location: bytes) -> str:
    """The scheme a Location names, resolved against the request's URL as the redirect would be."""
    target = location.decode("latin-1").strip()  # a scheme is ASCII; the rest does not matter here
    return urlsplit(urljoin(request_url, target)).scheme.lower()


class RedirectSchemeGuard:
    """Downloader middleware: a 3xx to a scheme other than http(s) is archived and recorded as a 3xx."""

    def __init__(self, crawler: Crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        location = response.headers.get("Location")
        if response.status not in REDIRECT_STATUSES or not location:
            return response
        scheme = redirect_scheme(request.url, location)
        if scheme not in FOLLOWED_SCHEMES:
            request.meta["dont_redirect"] = True
            self.stats.inc_value(f"redirect/dropped/scheme/{scheme or 'none'}")
        return response
