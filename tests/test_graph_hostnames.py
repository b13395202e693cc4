"""Host-name conversions behave as Common Crawl's files and the scheduler expect."""

from __future__ import annotations

import socket

import pytest

from graph.hostnames import (
    HostNameError,
    host_from_url,
    normalize_host,
    public_suffix,
    registered_domain,
    reverse_host,
    same_host,
    strip_www,
    surt_host,
    unreverse_host,
    unsurt_host,
    www_key,
    www_variants,
)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("WWW.Example.COM", "www.example.com"),
        ("example.com:8080", "example.com"),
        ("example.com.", "example.com"),
        ("  user:pw@Example.com:443 ", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("BÜCHER.de", "xn--bcher-kva.de"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("[2001:DB8::1]:8080", "2001:db8::1"),
        ("192.168.0.1:80", "192.168.0.1"),
        ("news-17.example", "news-17.example"),
    ],
)
def test_host_spellings_normalise_to_one_form(raw: str, normal: str) -> None:
    assert normalize_host(raw) == normal


@pytest.mark.parametrize("bad", ["", "   ", "exa mple.com", "a..b", "example.com:http", "[::1", "a/b"])
def test_strings_that_are_not_hosts_are_rejected_with_the_input_quoted(bad: str) -> None:
    with pytest.raises(HostNameError) as caught:
        normalize_host(bad)
    assert repr(bad) in str(caught.value)


def test_reversing_a_host_matches_cc_ranks_order_and_round_trips() -> None:
    assert reverse_host("www.example.com") == "com.example.www"
    assert unreverse_host("com.googleapis.fonts") == "fonts.googleapis.com"
    assert unreverse_host(reverse_host("a.b.c.d")) == "a.b.c.d"


def test_surt_host_strips_www_like_the_cc_host_index() -> None:
    assert surt_host("www.commoncrawl.org") == "org,commoncrawl"
    assert surt_host("WWW2.Ebury.ae:443") == "ae,ebury"
    assert surt_host("blog.commoncrawl.org") == "org,commoncrawl,blog"
    assert surt_host("10.0.0.1") == "10.0.0.1"
    assert unsurt_host("org,commoncrawl") == "commoncrawl.org"


def test_registered_domain_follows_the_public_suffix_list() -> None:
    assert registered_domain("www.bbc.co.uk") == "bbc.co.uk"
    assert registered_domain("a.b.example.com") == "example.com"
    assert registered_domain("ebury.ae") == "ebury.ae"
    assert registered_domain("foo.github.io") == "github.io"
    assert registered_domain("foo.github.io", include_private=True) == "foo.github.io"
    assert public_suffix("www.bbc.co.uk") == "co.uk"


def test_registered_domain_of_test_web_and_ip_hosts_is_usable() -> None:
    assert registered_domain("news-17.example") == "news-17.example"
    assert registered_domain("a.news-17.example") == "news-17.example"
    assert registered_domain("127.0.0.1") == "127.0.0.1"
    assert registered_domain("co.uk") == "co.uk"


def test_public_suffix_list_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert registered_domain("shop.example.com.au") == "example.com.au"


def test_www_conventions_meet_on_one_key() -> None:
    assert strip_www("www.example.com") == "example.com"
    assert strip_www("www.com") == "www.com"
    assert www_key("WWW.Example.com") == www_key("example.com") == "example.com"
    assert same_host("www.facebook.com", "facebook.com:443")
    assert not same_host("m.facebook.com", "facebook.com")
    assert www_variants("facebook.com") == ("facebook.com", "www.facebook.com")
    assert www_variants("www.facebook.com") == ("www.facebook.com", "facebook.com")
    assert www_variants("localhost") == ("localhost",)


def test_host_from_url_takes_the_netloc() -> None:
    assert host_from_url("https://WWW.Example.com:8443/a?b#c") == "www.example.com"
    with pytest.raises(HostNameError, match="without a host"):
        host_from_url("/relative/path")
