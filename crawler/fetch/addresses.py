"""Address safety: no request to loopback, private, CGNAT, link-local, multicast or reserved targets.

A host's verdict is decided from every address its name resolves to (a hosts file first, then DNS),
kept for `HOSTCRAWL_ADDRESS_TTL` seconds, and checked again on the address the connection actually
reached. A name that resolves nowhere is refused (fail closed), except when a proxy is configured:
then the proxy resolves names the crawler cannot (the local test web does exactly that).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import defer

from crawler.fetch.cdn_ranges import cdn_of
from scheduler.scrapy_scheduler import host_address, host_discovered

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
PRIVATE_HOST_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
# Named ranges first, so the stats say why; anything else that is not globally routable is "reserved".
NAMED_RANGES: tuple[tuple[str, str], ...] = (
    ("100.64.0.0/10", "cgnat"),  # carrier-grade NAT; cloud metadata (100.100.100.200) lives here
    ("198.18.0.0/15", "benchmark"),
    ("64:ff9b:1::/48", "private"),  # local-use NAT64
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 prefix: the IPv4 address is embedded
_NAMED = tuple((ipaddress.ip_network(net), reason) for net, reason in NAMED_RANGES)


def address_class(address: IPAddress) -> str | None:
    """Why an address must not be crawled (a stats reason), or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or _nat64(address)
        if embedded is not None:
            return address_class(embedded)
        if address.teredo is not None:
            return address_class(address.teredo[1])
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local:
        return "link_local"
    if address.is_multicast:
        return "multicast"
    for network, reason in _NAMED:
        if address.version == network.version and address in network:
            return reason
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private"
    return None if address.is_global else "reserved"


def _nat64(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


IPV4_SHORTHAND = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}", re.IGNORECASE)


def literal_address(host: str) -> IPAddress | None:
    """The address a host name spells out, as a resolver or proxy would read it: dotted quads and IPv6,
    and the inet_aton forms (`127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `2130706433`), trailing dot or not."""
    name = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if IPV4_SHORTHAND.fullmatch(name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


def normal_host(host: str) -> str:
    """A host name as resolvers see it: lower case, no trailing dot (`LocalHost.` is `localhost`)."""
    return host.lower().rstrip(".")


class ForbiddenAddress(IgnoreRequest):
    """The resolver refused the address a name resolves to; `reason` is its address class."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def read_hosts_file(path: Path) -> dict[str, list[IPAddress]]:
    """An /etc/hosts-style file: `ADDRESS NAME [NAME ...]`, `#` comments; bad lines are skipped."""
    table: dict[str, list[IPAddress]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2 or (address := literal_address(fields[0])) is None:
            continue
        for name in fields[1:]:
            table.setdefault(normal_host(name), []).append(address)
    return table


class PrivateAddressGuard:
    """Refuses requests whose target is not a public address, unless the crawl allows private ones; in
    both cases it tells the politeness groups which address each host is on."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.allow_private = settings.getbool("HOSTCRAWL_ALLOW_PRIVATE")
        self.crawler = crawler
        self.ttl = settings.getfloat("HOSTCRAWL_ADDRESS_TTL", 300.0)
        self.proxied = bool(settings.get("HOSTCRAWL_PROXY"))
        hosts_file = settings.get("HOSTCRAWL_HOSTS_FILE")
        self.hosts_file = read_hosts_file(Path(hosts_file)) if hosts_file else {}
        self.verdicts: dict[str, tuple[str | None, float]] = {}  # host -> (reason, expires at)
        crawler.signals.connect(self.discovered, signal=host_discovered)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def discovered(self, host: str) -> None:
        """A host the hosts file knows joins its address's politeness group before its first request."""
        listed = self.hosts_file.get(host)
        if listed and (self.allow_private or not any(address_class(a) for a in listed)):
            self._announce(host, listed)

    def _announce(self, host: str, addresses: list[IPAddress]) -> None:
        for address in addresses:
            if cdn := cdn_of(str(address)):  # a CDN edge is not shared hosting (crawler/fetch/cdn_ranges.py)
                self.crawler.stats.inc_value(f"politeness/cdn_address/{cdn}")
                continue
            self.crawler.signals.send_catch_log(signal=host_address, host=host, address=str(address))

    async def process_request(self, request: Request, spider: Any = None) -> None:
        host = normal_host(urlparse_cached(request).hostname or "")
        now = time.monotonic()
        cached = self.verdicts.get(host)
        if cached is None or cached[1] <= now:
            reason = await self._classify(host)
            self.verdicts[host] = (reason, now + self.ttl)
        else:
            reason = cached[0]
        if reason is not None and not self.allow_private:
            self._refuse(host, reason)

    def check_connected(self, request: Request, response: Response) -> Response:
        """The address the connection reached, when it went straight to the host (not via a proxy);
        the download handler calls this before any middleware sees the response."""
        address = response.ip_address
        if address is None or "proxy" in request.meta or self.allow_private:
            return response
        reason = address_class(address)
        if reason is not None:
            host = urlparse_cached(request).hostname or ""
            self.verdicts[host.lower()] = (reason, time.monotonic() + self.ttl)
            self.crawler.stats.inc_value("fetch/refused/connected_address")
            self._refuse(host, reason, f" (connected to {address})")
        return response

    def _refuse(self, host: str, reason: str, detail: str = "") -> None:
        self.crawler.stats.inc_value(f"fetch/refused/{reason}")
        raise IgnoreRequest(
            f"refusing {reason} target {host}{detail}; pass --allow-private to crawl it on purpose"
        )

    async def _classify(self, host: str) -> str | None:
        addresses = self.known_addresses(host)
        if addresses is None and not (self.allow_private and self.proxied):
            try:
                addresses = await self._dns(host)  # (allowing everything behind a proxy: nothing to ask)
            except ForbiddenAddress as refused:  # it resolves here, to what must not be crawled: a
                return refused.reason  # proxy would resolve it the same way (fail closed)
        return self.verdict(host, addresses or [])

    def known_addresses(self, host: str) -> list[IPAddress] | None:
        """Addresses known without asking DNS: a literal, a loopback name, the hosts file; else None."""
        host = normal_host(host)
        if host in PRIVATE_HOST_NAMES or host.endswith(".localhost"):
            return [ipaddress.IPv4Address("127.0.0.1")]
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        return self.hosts_file.get(host) or None

    def verdict(self, host: str, addresses: list[IPAddress]) -> str | None:
        """Refused when any address is not public, or when there is none (fail closed)."""
        if not addresses:
            if self.proxied:  # only the proxy can resolve it; the proxy is the user's choice
                self.crawler.stats.inc_value("address/resolved_by_proxy")
                return None
            return "unresolvable"
        reasons = [r for r in map(address_class, addresses) if r is not None]
        if reasons and not self.allow_private:
            return reasons[0]
        self._announce(host, addresses)  # with --allow-private, private hosts share address groups too
        return reasons[0] if reasons else None

    async def _dns(self, host: str) -> list[IPAddress]:
        from twisted.internet import reactor

        try:
            resolved = await maybe_deferred_to_future(reactor.resolve(host))  # type: ignore[arg-type]
        except ForbiddenAddress:
            raise
        except Exception:  # not found here: only a proxy can resolve it (see verdict)
            return []
        address = literal_address(str(resolved))
        return [] if address is None else [address]


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's caching DNS resolver (TWISTED_DNS_RESOLVER) that answers from the hosts file first and
    never hands a connection a forbidden address: even when DNS changes its answer after the guard
    asked (DNS rebinding), nothing connects to loopback, private, CGNAT or link-local targets. Only the
    configured proxy is exempt."""

    def __init__(
        self,
        reactor: Any,
        cache_size: int,
        timeout: float,
        hosts: dict[str, list[IPAddress]] | None = None,
        exempt: frozenset[str] = frozenset(),
        allow_private: bool = True,
    ) -> None:
        super().__init__(reactor, cache_size, timeout)
        self.hosts = hosts or {}
        self.exempt = exempt
        self.allow_private = allow_private

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> Self:
        settings = crawler.settings
        hosts_file = settings.get("HOSTCRAWL_HOSTS_FILE")
        proxy = settings.get("HOSTCRAWL_PROXY")
        return cls(
            reactor,
            settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0,
            settings.getfloat("DNS_TIMEOUT"),
            read_hosts_file(Path(hosts_file)) if hosts_file else {},
            frozenset({(urlsplit(proxy).hostname or "").lower()} if proxy else ()),
            settings.getbool("HOSTCRAWL_ALLOW_PRIVATE"),
        )

    def getHostByName(self, name: str, timeout: Any = ()) -> defer.Deferred[str]:
        listed = self.hosts.get(normal_host(name))
        if listed:
            answer: defer.Deferred[str] = defer.succeed(str(listed[0]))
        elif (literal := literal_address(name)) is not None:
            answer = defer.succeed(str(literal))
        else:
            answer = super().getHostByName(name, timeout)
        if self.allow_private or name.lower() in self.exempt:
            return answer
        return answer.addCallback(self._checked, name)

    @staticmethod
    def _checked(address: str, name: str) -> str:
        literal = literal_address(address)
        reason = "unresolvable" if literal is None else address_class(literal)
        if reason is not None:
            raise ForbiddenAddress(f"refusing {reason} target {name} (it resolved to {address})", reason)
        return address
