"""Hosts that test a crawler's politeness on the real web's terms: robots.txt that answers 429 or 503,
times out or disallows everything, an hour (or days) of Retry-After, pages that always time out,
redirects to private and CGNAT addresses, hosts on one shared address (`shared_ip_hosts`) and a
wildcard subdomain farm (`farm_hosts`, model.py).

Opt-in (`TestWebConfig.politeness_hosts`): host i gets the i-th kind named there, so the generated web
is unchanged for everyone else. `addresses()` is the test web's resolver: an /etc/hosts-style table
of every name it serves, all on public-looking addresses (nothing is ever sent there: the test web is
reached as a proxy), plus the internal names its redirects point at, on private ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.testweb.specs import HostSpec, Rendered, SiteView

POLITENESS_KINDS = (
    "robots_429",
    "robots_timeout",
    "robots_disallow_all",
    "retry_hour",
    "redirect_private",
    "robots_5xx",  # robots.txt answers 503, always: "not now", retried, then the host is given up
    "page_timeout",  # robots.txt is served, every page outlasts the crawler's timeout: the circuit breaker
    "retry_days",  # 429 with a Retry-After beyond any park: the host is dropped, with its reason
)
ROBOTS_429_TIMES = 2  # a robots_429 host answers 429 to its first robots.txt requests, then serves it
ROBOTS_429_RETRY_AFTER = 2
ROBOTS_TIMEOUT_S = 60.0  # longer than any crawler timeout
RETRY_HOUR_S = 3600
RETRY_DAYS_S = 2 * 86400
PAGE_TIMEOUT_S = 60.0
ADDRESSES_FILE = "addresses.txt"
SHARED_ADDRESS = "45.255.0.1"
# /go/<name> on a redirect_private host answers 302 to a target no crawler may fetch
PRIVATE_REDIRECTS = {
    "metadata": "http://100.100.100.200/latest/meta-data/",  # CGNAT: cloud metadata
    "mapped": "http://[::ffff:169.254.169.254]/latest/meta-data/",  # IPv4-mapped link-local
    "internal": "http://internal-{index}.example/admin",  # a name the resolver maps to 10.x
}
GO_PATHS = tuple(f"/go/{name}" for name in PRIVATE_REDIRECTS)


def public_address(index: int) -> str:
    return f"45.{(index >> 8) & 255}.{index & 255}.10"


def internal_name(spec: HostSpec) -> str:
    return f"internal-{spec.index}.example"


def addresses(model: SiteView) -> str:
    """The resolver's table, one `ADDRESS NAME` line per name."""
    first = len(model.cfg.politeness_hosts)
    shared = range(first, first + model.cfg.shared_ip_hosts)
    lines = [
        f"{SHARED_ADDRESS if h.index in shared else public_address(h.index)} {h.name}" for h in model.hosts
    ]
    for h in model.hosts:
        if h.hostile == "redirect_private":
            lines.append(f"10.0.{(h.index >> 8) & 255}.{h.index & 255} {internal_name(h)}")
    return "\n".join(lines) + "\n"


def politeness_route(model: SiteView, spec: HostSpec, path: str) -> Rendered | None:
    """The response of a politeness host, or None where it behaves like any other host."""
    from crawler.testweb.specs import Rendered

    kind = spec.hostile
    text = {"Content-Type": "text/plain; charset=utf-8"}
    if path == "/robots.txt":
        body = model.robots_txt(spec) or b""
        if kind == "robots_429":
            return Rendered(200, dict(text), body, effect="robots_429")
        if kind == "robots_timeout":
            return Rendered(200, dict(text), body, delay=ROBOTS_TIMEOUT_S)
        if kind == "robots_disallow_all":
            return Rendered(200, dict(text), b"User-agent: *\nDisallow: /\n")
        if kind == "robots_5xx":
            return Rendered(503, dict(text), b"503 Service Unavailable\n")
        return None
    if kind in ("retry_hour", "retry_days"):
        retry_after = RETRY_HOUR_S if kind == "retry_hour" else RETRY_DAYS_S
        return Rendered(429, {**text, "Retry-After": str(retry_after)}, b"429 Too Many Requests\n")
    if kind == "page_timeout":
        return Rendered(
            200, {"Content-Type": "text/html; charset=utf-8"}, b"<html></html>", delay=PAGE_TIMEOUT_S
        )
    if kind == "redirect_private" and path in GO_PATHS:
        target = PRIVATE_REDIRECTS[path.removeprefix("/go/")].format(index=spec.index)
        return Rendered(302, {**text, "Location": target}, b"Moved\n")
    return None
