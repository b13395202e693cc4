"""What a page says crawlers may do with it: robots directives and opt-outs of AI training.

- Robots directives (`noindex`, `nofollow`, `none`) from `<meta name="robots">`, `<meta name="TOKEN">` and
  `X-Robots-Tag` headers, including the agent-scoped header form (`X-Robots-Tag: hostcrawl: noindex`),
  which applies only when the agent is our product token.
- AI-training opt-outs: `noai` in meta robots or X-Robots-Tag, the TDMRep `tdm-reservation: 1` header or
  `<meta name="tdm-reservation" content="1">`, and a host's `/.well-known/tdmrep.json` (rules parsed here,
  fetched by crawler/fetch/tdmrep.py).

A noindex page is archived but not curated; a nofollow page's links are not followed; an opted-out page is
archived but kept out of the curated text unless the crawl says otherwise (`HOSTCRAWL_CURATE_OPTOUT`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

# Directives that carry a value after a colon: `unavailable_after: <date>` is not an agent named
# "unavailable_after".
VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
TDM_HEADER = "tdm-reservation"
MAX_TDMREP_RULES = 1000


@dataclass(frozen=True, slots=True)
class PageDirectives:
    noindex: bool = False
    nofollow: bool = False
    optout: str | None = None  # why the page opts out of AI training, or None


def product_token(user_agent: str) -> str:
    """`hostcrawl/0.1 (+https://...)` -> `hostcrawl`: the name an agent-scoped directive must use."""
    return user_agent.split("/", 1)[0].split()[0].strip().lower() if user_agent.strip() else ""


def header_directives(values: Iterable[str], token: str) -> set[str]:
    """X-Robots-Tag values that apply to us: unscoped ones and those scoped to our product token.

    `X-Robots-Tag: otherbot: noindex, nofollow` scopes both directives to otherbot; a header may hold
    several scopes (`noai, otherbot: noindex`), and a directive's own colon (`unavailable_after: ...`)
    does not start one."""
    out: set[str] = set()
    for value in values:
        agent: str | None = None
        for raw in value.split(","):
            item = raw.strip().lower()
            name, colon, rest = item.partition(":")
            if colon and name.strip() not in VALUED and " " not in name.strip():
                agent, item = name.strip(), rest.strip()
            if item and (agent is None or agent == token):
                out.add(item.split(":", 1)[0].strip())
    return out


def meta_directives(metas: Iterable[tuple[str, str]], token: str) -> tuple[set[str], bool]:
    """(robots directives, TDM reservation) from a page's (name, content) meta pairs."""
    out: set[str] = set()
    reserved = False
    for name, content in metas:
        name = name.strip().lower()
        if name in ("robots", token):
            out.update(d.strip().lower() for d in content.split(",") if d.strip())
        elif name == TDM_HEADER:
            reserved = reserved or content.strip() == "1"
    return out, reserved


def page_directives(
    header_values: Iterable[str],
    tdm_header: str | None,
    metas: Iterable[tuple[str, str]],
    token: str,
    host_reserved: bool = False,
) -> PageDirectives:
    """Everything a page's headers and meta tags (and its host's tdmrep.json) say, in one verdict."""
    header = header_directives(header_values, token)
    meta, meta_reserved = meta_directives(metas, token)
    every = header | meta
    optout = next(
        (
            reason
            for reason, applies in (
                ("tdmrep_json", host_reserved),
                ("tdm_header", (tdm_header or "").strip() == "1"),
                ("tdm_meta", meta_reserved),
                ("noai_header", "noai" in header),
                ("noai_meta", "noai" in meta),
            )
            if applies
        ),
        None,
    )
    return PageDirectives(
        noindex=bool(every & {"noindex", "none"}),
        nofollow=bool(every & {"nofollow", "none"}),
        optout=optout,
    )


def kept_out(item: dict[str, Any], curate_optout: bool) -> str | None:
    """Why a page must stay out of the curated text whatever its score (`noindex`, `optout`), or None."""
    if item.get("noindex"):
        return "noindex"
    if item.get("optout") and not curate_optout:
        return "optout"
    return None


@dataclass(frozen=True, slots=True)
class TdmRule:
    pattern: re.Pattern[str]
    reserved: bool


def _compile(location: str) -> re.Pattern[str]:
    """A robots.txt-style path pattern: `*` is any run of characters, a final `$` ends the path."""
    anchored = location.endswith("$")
    body = location[:-1] if anchored else location
    regex = ".*".join(re.escape(unquote(part)) for part in body.split("*"))
    return re.compile(regex + ("$" if anchored else ""))


def parse_tdmrep(body: bytes) -> list[TdmRule] | None:
    """The rules of a tdmrep.json (an array of {location, tdm-reservation, tdm-policy}); None if it is
    not one. Rules without a string location are skipped; a reservation other than 0 or 1 is unset."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, list):
        return None
    rules = []
    for entry in data[:MAX_TDMREP_RULES]:
        if not isinstance(entry, dict) or not isinstance(entry.get("location"), str):
            continue
        value = entry.get(TDM_HEADER)
        if str(value).strip() not in ("0", "1"):
            continue
        location = entry["location"] if entry["location"].startswith("/") else "/" + entry["location"]
        rules.append(TdmRule(_compile(location), str(value).strip() == "1"))
    return rules


def tdm_reserved(rules: list[TdmRule], url: str) -> bool:
    """TDMRep: the first rule whose location matches the URL's path decides."""
    parts = urlsplit(url)
    path = unquote(parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return next((rule.reserved for rule in rules if rule.pattern.match(path)), False)
