"""Address safety: which addresses a crawl refuses, the hosts file, and the address a connection reached."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.fetch.addresses import GuardedResolver, PrivateAddressGuard, address_class, read_hosts_file
from scheduler.scrapy_scheduler import host_address


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link_local"),
        ("fe80::1", "link_local"),
        ("100.100.100.200", "cgnat"),  # cloud metadata
        ("100.64.0.1", "cgnat"),
        ("198.18.0.1", "benchmark"),
        ("198.19.255.255", "benchmark"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "private"),  # documentation ranges are not on the internet either
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link_local"),
        ("::ffff:100.100.100.200", "cgnat"),
        ("64:ff9b::a9fe:a9fe", "link_local"),  # NAT64 of 169.254.169.254
        ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
        ("8.8.8.8", None),
        ("100.128.0.1", None),  # just outside 100.64.0.0/10
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_address_class(address: str, reason: str | None) -> None:
    assert address_class(ipaddress.ip_address(address)) == reason


def test_hosts_file_maps_names_to_every_listed_address(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text(
        "# comment\n45.0.0.1 a.example b.example\n10.0.0.1 B.example. # internal\nnot-an-ip c.example\n"
    )
    table = read_hosts_file(path)
    assert [str(a) for a in table["a.example"]] == ["45.0.0.1"]
    assert [str(a) for a in table["b.example"]] == ["45.0.0.1", "10.0.0.1"]
    assert "c.example" not in table


def _guard(**settings: object) -> PrivateAddressGuard:
    return PrivateAddressGuard(get_crawler(settings_dict=settings))


def test_the_address_a_connection_reached_is_checked() -> None:
    """A name that looked public but connected to loopback (DNS rebinding) is refused on arrival."""
    guard = _guard()
    request = Request("http://rebinding.example/")
    response = Response(request.url, request=request, ip_address=ipaddress.ip_address("127.0.0.1"))
    with pytest.raises(IgnoreRequest, match="loopback"):
        guard.check_connected(request, response)
    assert guard.verdicts["rebinding.example"][0] == "loopback", "the next request is refused up front"
    public = Response(request.url, request=request, ip_address=ipaddress.ip_address("8.8.8.8"))
    assert guard.check_connected(request, public) is public
    proxied = Request("http://via-proxy.example/", meta={"proxy": "http://127.0.0.1:8080"})
    through = Response(proxied.url, request=proxied, ip_address=ipaddress.ip_address("127.0.0.1"))
    assert guard.check_connected(proxied, through) is through, "the proxy itself may be local"


def test_names_are_refused_by_their_address_and_fail_closed(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.7 internal.example\n45.0.0.1 public.example\n")
    guard = _guard(HOSTCRAWL_HOSTS_FILE=str(hosts))

    def verdict(g: PrivateAddressGuard, host: str) -> str | None:
        return g.verdict(host, g.known_addresses(host) or [])

    assert verdict(guard, "internal.example") == "private"
    assert verdict(guard, "public.example") is None
    assert verdict(guard, "localhost") == "loopback"
    assert verdict(guard, "app.localhost") == "loopback"
    assert verdict(guard, "::ffff:a9fe:a9fe") == "link_local"
    assert guard.known_addresses("nowhere.invalid") is None, "DNS is asked"
    assert verdict(guard, "nowhere.invalid") == "unresolvable", "a name that resolves nowhere is refused"
    proxied = _guard(HOSTCRAWL_HOSTS_FILE=str(hosts), HOSTCRAWL_PROXY="http://127.0.0.1:1")
    assert verdict(proxied, "nowhere.invalid") is None, "only the proxy can resolve it"
    assert verdict(proxied, "internal.example") == "private", "a known private name stays refused"


def test_connections_never_go_to_a_forbidden_address(tmp_path: Path) -> None:
    """The resolver the downloader connects with refuses what the guard would, whatever DNS says then."""
    hosts = {
        "public.example": [ipaddress.ip_address("45.0.0.1")],
        "rebound.example": [ipaddress.ip_address("127.0.0.1")],
    }
    resolver = GuardedResolver(None, 0, 5.0, hosts, frozenset({"127.0.0.1"}), allow_private=False)
    answers: list[object] = []
    resolver.getHostByName("public.example").addBoth(answers.append)
    resolver.getHostByName("rebound.example").addBoth(answers.append)
    resolver.getHostByName("100.100.100.200").addBoth(answers.append)
    resolver.getHostByName("127.0.0.1").addBoth(answers.append)  # the proxy
    assert answers[0] == "45.0.0.1"
    assert "refusing loopback target rebound.example" in str(getattr(answers[1], "value", ""))
    assert "refusing cgnat target 100.100.100.200" in str(getattr(answers[2], "value", ""))
    assert answers[3] == "127.0.0.1"
    allowing = GuardedResolver(None, 0, 5.0, hosts, allow_private=True)
    allowing.getHostByName("rebound.example").addBoth(answers.append)
    assert answers[4] == "127.0.0.1", "--allow-private: the hosts file still answers"


def test_allow_private_lifts_the_refusals_but_keeps_the_address_groups(tmp_path: Path) -> None:
    """With --allow-private the guard refuses nothing, and still tells the politeness groups which
    address each host is on: hosts sharing one private address still share one connection."""
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.7 a.internal.example b.internal.example\n")
    guard = _guard(HOSTCRAWL_HOSTS_FILE=str(hosts), HOSTCRAWL_ALLOW_PRIVATE=True)
    heard: list[tuple[str, str]] = []

    def hear(host: str, address: str) -> None:
        heard.append((host, address))

    guard.crawler.signals.connect(hear, signal=host_address)
    guard.discovered("a.internal.example")
    asyncio.run(guard.process_request(Request("http://b.internal.example/")))  # not refused
    assert heard == [("a.internal.example", "10.0.0.7"), ("b.internal.example", "10.0.0.7")]
    request = Request("http://a.internal.example/")
    response = Response(request.url, request=request, ip_address=ipaddress.ip_address("10.0.0.7"))
    assert guard.check_connected(request, response) is response
    refusing = _guard(HOSTCRAWL_HOSTS_FILE=str(hosts))
    with pytest.raises(IgnoreRequest, match="private"):
        asyncio.run(refusing.process_request(Request("http://b.internal.example/")))


def test_hosts_behind_a_cdn_are_not_one_politeness_group(tmp_path: Path) -> None:
    """Thousands of unrelated sites share a Cloudflare or Fastly edge address: grouped by it, they would
    get one request in flight for the whole run. Shared hosting (any other address) is still grouped."""
    from crawler.fetch.cdn_ranges import cdn_of

    assert cdn_of("104.16.132.229") == "cloudflare" and cdn_of("2606:4700::6810:84e5") == "cloudflare"
    assert cdn_of("151.101.1.69") == "fastly" and cdn_of("::ffff:151.101.1.69") == "fastly"
    assert cdn_of("203.0.113.7") is None and cdn_of("8.8.8.8") is None
    hosts = tmp_path / "hosts"
    hosts.write_text("104.16.132.229 a.example b.example\n93.184.215.14 c.example d.example\n")
    guard = _guard(HOSTCRAWL_HOSTS_FILE=str(hosts))
    heard: list[tuple[str, str]] = []

    def hear(host: str, address: str) -> None:
        heard.append((host, address))

    guard.crawler.signals.connect(hear, signal=host_address)
    for host in ("a.example", "b.example", "c.example", "d.example"):
        guard.discovered(host)
    assert heard == [("c.example", "93.184.215.14"), ("d.example", "93.184.215.14")]
    assert guard.crawler.stats.get_value("politeness/cdn_address/cloudflare") == 2
