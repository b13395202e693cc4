"""Addresses of content delivery networks, where unrelated sites share an edge address.

Politeness groups by IP address (scheduler/groups.py) exist for shared hosting: many small sites on one
server, which one request at a time protects. Behind a CDN the same rule would put thousands of unrelated
sites into one group with one request in flight for the whole run, and protect nobody (the edge serves them
all from its caches). A host on one of these addresses is therefore not grouped by address; its own
politeness (delay, Crawl-delay, backoff) and its registered domain's group still apply.

The ranges are the providers' published lists (Cloudflare's ips-v4/ips-v6, Fastly's public-ip-list) as of
2026; providers change them rarely, and a stale range only means a few hosts are grouped by address again.
"""

from __future__ import annotations

import functools
import ipaddress

CDN_RANGES: dict[str, tuple[str, ...]] = {
    "cloudflare": (
        "173.245.48.0/20", "103.21.244.0/22", "103.22.200.0/22", "103.31.4.0/22", "141.101.64.0/18",
        "108.162.192.0/18", "190.93.240.0/20", "188.114.96.0/20", "197.234.240.0/22", "198.41.128.0/17",
        "162.158.0.0/15", "104.16.0.0/13", "104.24.0.0/14", "172.64.0.0/13", "131.0.72.0/22",
        "2400:cb00::/32", "2606:4700::/32", "2803:f800::/32", "2405:b500::/32", "2405:8100::/32",
        "2a06:98c0::/29", "2c0f:f248::/32",
    ),
    "fastly": (
        "23.235.32.0/20", "43.249.72.0/22", "103.244.50.0/24", "103.245.222.0/23", "103.245.224.0/24",
        "104.156.80.0/20", "140.248.64.0/18", "140.248.128.0/17", "146.75.0.0/17", "151.101.0.0/16",
        "157.52.64.0/18", "167.82.0.0/17", "167.82.128.0/20", "167.82.160.0/20", "167.82.224.0/20",
        "172.111.64.0/18", "185.31.16.0/22", "199.27.72.0/21", "199.232.0.0/16",
        "2a04:4e40::/32", "2a04:4e42::/32",
    ),
}  # fmt: skip


@functools.cache
def _networks() -> tuple[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network], ...]:
    return tuple((name, ipaddress.ip_network(cidr)) for name, cidrs in CDN_RANGES.items() for cidr in cidrs)


def cdn_of(address: str) -> str | None:
    """The CDN whose edge `address` is (an IPv4-mapped IPv6 address counts as its IPv4), or None."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return next((name for name, net in _networks() if ip.version == net.version and ip in net), None)
