"""robots.txt rules per RFC 9309, from the RFC's own examples and the cases the old parser got wrong."""

from __future__ import annotations

import pytest

from crawler.fetch.robots_rules import RobotsRules

# RFC 9309 §5.1
RFC_EXAMPLE = b"""User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""
ORIGIN = "https://www.example.com"


@pytest.mark.parametrize(
    ("agent", "path", "allowed"),
    [
        ("foobot", "/example/page.html", True),
        ("foobot", "/example/allowed.gif", True),
        ("foobot", "/", False),
        ("foobot", "/publications/", False),
        ("barbot", "/example/page.html", False),
        ("bazbot", "/example/page.html", False),
        ("barbot", "/example/other.html", True),
        ("quxbot", "/example/page.html", True),  # an empty group allows everything
        ("otherbot", "/example/page.html", False),
        ("otherbot", "/publications/", True),
        ("otherbot", "/images/cat.gif", False),
        ("otherbot", "/images/cat.gifs", True),  # `$` ends the pattern
        ("FooBot/2.1", "/example/page.html", True),  # case-insensitive product token, version ignored
    ],
)
def test_rfc_9309_example(agent: str, path: str, allowed: bool) -> None:
    assert RobotsRules(RFC_EXAMPLE, agent).allowed(ORIGIN + path) is allowed


def test_rfc_9309_longest_match() -> None:
    """§5.2: the most specific (longest) match wins."""
    body = b"User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    rules = RobotsRules(body, "foobot")
    assert rules.allowed(ORIGIN + "/example/page/")
    assert not rules.allowed(ORIGIN + "/example/page/disallowed.gif")


def test_longest_match_is_measured_on_the_rule_as_written() -> None:
    """`/*?lang=` is 8 octets and loses to the 10-octet `/i/streams`, however it is percent-encoded."""
    rules = RobotsRules(b"User-agent: *\nAllow: /*?lang=\nDisallow: /i/streams\n", "hostcrawl")
    assert not rules.allowed(ORIGIN + "/i/streams?lang=en")
    assert rules.allowed(ORIGIN + "/news?lang=en")


def test_dollar_ends_a_pattern_and_nothing_else() -> None:
    rules = RobotsRules(b"User-agent: *\nDisallow: /p/\nAllow: /p/*.css$\n", "hostcrawl")
    assert rules.allowed(ORIGIN + "/p/a.css")
    assert not rules.allowed(ORIGIN + "/p/a.css$/secret")
    assert not rules.allowed(ORIGIN + "/p/a.css?v=1")


def test_product_token_must_match_exactly() -> None:
    body = b"User-agent: host\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"
    rules = RobotsRules(body, "hostcrawl/0.1")
    assert rules.allowed(ORIGIN + "/page.html"), "`User-agent: host` is not our group"
    assert not rules.allowed(ORIGIN + "/private/x")
    own = RobotsRules(b"User-agent: hostcrawl\nDisallow: /\n", "hostcrawl/0.1")
    assert not own.allowed(ORIGIN + "/page.html")


def test_crawl_delay_of_our_group_else_the_star_group() -> None:
    body = b"User-agent: hostcrawl\nCrawl-delay: 7\n\nUser-agent: *\nCrawl-delay: 3\n"
    assert RobotsRules(body, "hostcrawl/0.1").crawl_delay() == 7.0
    assert RobotsRules(body, "otherbot").crawl_delay() == 3.0
    assert RobotsRules(b"User-agent: *\nDisallow: /x\n", "hostcrawl").crawl_delay() is None


def test_disallows_everything_only_when_nothing_can_be_allowed() -> None:
    assert RobotsRules(b"User-agent: *\nDisallow: /\n", "hostcrawl").disallows_everything(ORIGIN)
    assert RobotsRules(b"User-agent: hostcrawl\nDisallow: /*\n", "hostcrawl").disallows_everything(ORIGIN)
    partial = b"User-agent: *\nDisallow: /\nAllow: /public/\n"
    assert not RobotsRules(partial, "hostcrawl").disallows_everything(ORIGIN)
    assert not RobotsRules(b"User-agent: *\nDisallow: /$\n", "hostcrawl").disallows_everything(ORIGIN)
    assert not RobotsRules(b"User-agent: other\nDisallow: /\n", "hostcrawl").disallows_everything(ORIGIN)


def test_sitemaps_and_a_bom_are_read() -> None:
    body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\nSitemap: https://www.example.com/sitemap.xml\n"
    rules = RobotsRules(body, "hostcrawl")
    assert rules.sitemaps() == ["https://www.example.com/sitemap.xml"]
    assert not rules.allowed(ORIGIN + "/x/y")
