"""One robots.txt body read per RFC 9309, for one crawler: which URLs it may fetch, its Crawl-delay.

Rules are matched by Google's robots.txt library (`fast-robotstxt`), the reference implementation the
RFC was written from: the longest match is measured on the rule as written, `$` ends a pattern only
at its end, and a group applies only when its product token equals ours. Protego, Scrapy's default,
gets all three wrong (its priorities are lengths after percent-encoding, it adds a literal-`$` copy
of every anchored rule, and `User-agent: host` matches `hostcrawl`), so it reads only the
`Sitemap:` lines here, which belong to no group. No Scrapy import: the test web and the audit use it.
"""

from __future__ import annotations

import re

import robotstxt
from protego import Protego

MAX_ROBOTS_BYTES = 500 * 1024  # RFC 9309 §2.5: parse at least 500 KiB
DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"
EVERYTHING = ("/", "/*")
TOKEN = re.compile(r"[A-Za-z_-]+")  # §2.2.1: the product token, without version or comment


def product_token(user_agent: str) -> str:
    match = TOKEN.match(user_agent.strip())
    return match.group(0) if match else user_agent


class RobotsRules:
    """One robots.txt body, answering for one product token (the User-Agent up to its first '/')."""

    def __init__(self, body: bytes, user_agent: str) -> None:
        self.text = body[:MAX_ROBOTS_BYTES].decode("utf-8-sig", errors="ignore")
        self.user_agent = product_token(user_agent)
        self._matcher = robotstxt.RobotsMatcher()

    def allowed(self, url: str) -> bool:
        return bool(self._matcher.is_allowed(self.text, self.user_agent, url))

    def crawl_delay(self) -> float | None:
        matcher = robotstxt.RobotsMatcher()
        matcher.is_allowed(self.text, self.user_agent, "http://robots.invalid/")
        delay = matcher.crawl_delay
        return None if delay is None else float(delay)

    def sitemaps(self) -> list[str]:
        return list(Protego.parse(self.text).sitemaps)

    def disallows_everything(self, origin: str) -> bool:
        """`/` is disallowed by a `Disallow: /` (or `/*`) rule and the file has no Allow rule at all."""
        matcher = robotstxt.RobotsMatcher()
        if matcher.is_allowed(self.text, self.user_agent, origin + "/"):
            return False
        lines = self.text.splitlines()
        line = lines[matcher.matching_line - 1] if 0 < matcher.matching_line <= len(lines) else ""
        value = line.split("#", 1)[0].partition(":")[2].strip()
        has_allow = any(ln.split(":", 1)[0].strip().lower() == "allow" for ln in lines)
        return value in EVERYTHING and not has_allow
