"""Hosts that tell crawlers what they may do with a page, and links a crawler must not take.

A share of well-behaved hosts ("directive hosts") carry, on a fixed cycle of their content pages: robots
meta tags and X-Robots-Tag headers (noindex, nofollow, forms naming our product token and another
agent's), AI-training opt-outs (noai, TDMRep header and meta), links marked rel=nofollow to pages that
nothing else links to, redirects to URLs the crawler has already seen and to crawler traps, gzipped
sitemaps, and (every other such host) a /.well-known/tdmrep.json reserving one section.
"""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.testweb.specs import HostSpec

AGENT = "hostcrawl"  # the product token the agent-specific forms name
OTHER_AGENT = "otherbot"
# What content page j says about itself: PAGE_KINDS[(j % CYCLE) // 2] on odd j % CYCLE, nothing on even.
PAGE_KINDS = (
    "meta_noindex",
    "meta_nofollow",
    "header_noindex",
    "header_nofollow",
    "agent_noindex",
    "other_agent_noindex",  # names another crawler: does not apply to us
    "meta_noai",
    "header_noai",
    "tdm_header",
    "tdm_meta",
)
CYCLE = 2 * len(PAGE_KINDS)
NOINDEX_KINDS = frozenset({"meta_noindex", "header_noindex", "agent_noindex"})
NOFOLLOW_KINDS = frozenset({"meta_nofollow", "header_nofollow"})
OPTOUT_KINDS = frozenset({"meta_noai", "header_noai", "tdm_header", "tdm_meta"})
HIDDEN_PREFIX = "/hidden/"  # pages linked only through rel=nofollow or from nofollow pages
TDMREP_PATH = "/.well-known/tdmrep.json"
# Redirects the home page links to: (source, target). Targets are already-seen pages or traps.
TRAP_TARGETS = ("/t/t/t/t/t.html", "/" + "/".join(f"d{i}" for i in range(1, 15)) + "/x.html")


def page_kind(spec: HostSpec, j: int) -> str | None:
    slot = j % CYCLE
    return PAGE_KINDS[slot // 2] if spec.directives and slot % 2 else None


def rel_nofollow_link(spec: HostSpec, j: int) -> bool:
    """Ordinary page j links to its hidden twin with rel=nofollow (every fourth page)."""
    return spec.directives and j % 4 == 2


def hidden_path(j: int) -> str:
    return f"{HIDDEN_PREFIX}{j}.html"


def has_tdmrep(spec: HostSpec) -> bool:
    return spec.directives and spec.index % 2 == 0


def tdm_reserved_section(spec: HostSpec) -> str | None:
    """The section the host's tdmrep.json reserves, if it serves one."""
    return spec.sections[0] if has_tdmrep(spec) else None


def redirects(spec: HostSpec) -> dict[str, str]:
    """Redirect source -> target on a directive host: to pages the home page links anyway, a chain
    ending at one, and to URLs a trap guard must refuse."""
    if not spec.directives:
        return {}
    out = {f"/moved/{k}": spec.page_path(k) for k in range(min(3, spec.n_pages))}
    out["/moved/home"] = "/"
    out["/go/chain"] = "/moved/0"
    out["/go/trap"] = TRAP_TARGETS[0]
    out["/go/deep"] = TRAP_TARGETS[1]
    return out


def head_tags(kind: str | None) -> str:
    """<meta> tags page j carries in its <head>."""
    return {
        "meta_noindex": '<meta name="robots" content="noindex">',
        "meta_nofollow": '<meta name="robots" content="index, nofollow">',
        "meta_noai": '<meta name="robots" content="noai, noimageai">',
        "tdm_meta": '<meta name="tdm-reservation" content="1">',
    }.get(kind or "", "")


def headers(kind: str | None) -> dict[str, str]:
    """Response headers page j carries."""
    return {
        "header_noindex": {"X-Robots-Tag": "noindex"},
        "header_nofollow": {"X-Robots-Tag": "nofollow"},
        "agent_noindex": {"X-Robots-Tag": f"{AGENT}: noindex"},
        "other_agent_noindex": {"X-Robots-Tag": f"{OTHER_AGENT}: noindex, nofollow"},
        "header_noai": {"X-Robots-Tag": "noai"},
        "tdm_header": {"tdm-reservation": "1", "tdm-policy": "https://example.org/tdm-policy.json"},
    }.get(kind or "", {})


def tdmrep_json(spec: HostSpec) -> bytes | None:
    section = tdm_reserved_section(spec)
    if section is None:
        return None
    rules = [
        {"location": f"/{section}/*", "tdm-reservation": 1, "tdm-policy": f"http://{spec.name}/tdm-policy"},
        {"location": "/", "tdm-reservation": 0},
    ]
    return json.dumps(rules, indent=2).encode("utf-8")


def gzip_sitemap(xml: bytes) -> bytes:
    """The host's sitemap as a `.xml.gz` file; nested sitemaps are named `.xml.gz` too."""
    return gzip.compress(xml.replace(b".xml</loc>", b".xml.gz</loc>"), mtime=0)
