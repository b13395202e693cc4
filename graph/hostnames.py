"""One place that converts between host, reversed host, SURT host and registered domain.

Common Crawl spells the same host several ways: the web-graph ranks files reverse it (`com.example.www`)
and, up to cc-main-2025-oct-nov-dec, strip a leading `www.`; the host index keys it by SURT (`com,example`,
www stripped); the columnar URL index keeps www in `url_host_name_reversed`. Everything else in hostcrawl
uses the normal form of `normalize_host`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from urllib.parse import urlsplit

import idna
import tldextract

WWW_PREFIX = "www."
# SURT canonicalisation (the `surt` package, used for CC's indexes) strips `www`, `www1`, `www2`, ... .
SURT_WWW_RE = re.compile(r"^www\d*\.")
# Characters that can never be part of a host name; their presence means the caller passed something else.
FORBIDDEN_HOST_CHARS = re.compile(r"[\s/\\?#@<>\"'`{}|^%]")
MAX_HOST_LENGTH = 253
# Already in normal form (lower-case ASCII labels, no port, no dots at the ends): returned as is, quickly.
NORMAL_HOST_RE = re.compile(r"(?:[a-z0-9_-]+\.)*[a-z0-9_-]+")


class HostNameError(ValueError):
    """A string that cannot be turned into a host name; the message quotes it."""


def normalize_host(host: str) -> str:
    """Lowercase ASCII (IDNA A-label) host without port, userinfo, brackets or trailing dot."""
    if len(host) <= MAX_HOST_LENGTH and NORMAL_HOST_RE.fullmatch(host):
        return host
    text = host.strip()
    if "@" in text:
        text = text.rsplit("@", 1)[1]
    if text.startswith("["):  # bracketed IPv6, possibly with a port
        end = text.find("]")
        if end < 0:
            raise HostNameError(f"unclosed IPv6 bracket in host {host!r}")
        return _normalize_ipv6(text[1:end], host)
    if text.count(":") == 1:
        text, port = text.split(":")
        if port and not port.isdigit():
            raise HostNameError(f"non-numeric port in host {host!r}")
    elif text.count(":") > 1:
        return _normalize_ipv6(text, host)
    text = text.rstrip(".")
    if not text:
        raise HostNameError(f"empty host name in {host!r}")
    if not text.isascii():
        text = _idna_encode(text, host)
    text = text.lower()
    if FORBIDDEN_HOST_CHARS.search(text) or ".." in text or text.startswith("."):
        raise HostNameError(f"not a host name: {host!r}")
    if len(text) > MAX_HOST_LENGTH:
        raise HostNameError(f"host name longer than {MAX_HOST_LENGTH} characters: {host[:60]!r}...")
    return text


def _normalize_ipv6(text: str, original: str) -> str:
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError as exc:
        raise HostNameError(f"bad IPv6 address in host {original!r}: {exc}") from None


def _idna_encode(text: str, original: str) -> str:
    try:
        return idna.encode(text, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError:
        pass
    try:  # Python's IDNA 2003 codec accepts some names that strict IDNA 2008 rejects (emoji, symbols).
        return text.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise HostNameError(f"host {original!r} is not a valid internationalised name: {exc}") from None


def host_from_url(url: str) -> str:
    """Normal-form host of an absolute URL; raises HostNameError when it has none."""
    netloc = urlsplit(url.strip()).netloc
    if not netloc:
        raise HostNameError(f"URL without a host: {url!r}")
    return normalize_host(netloc)


def reverse_host(host: str) -> str:
    """'www.example.com' -> 'com.example.www', the order of CC's ranks files and url_host_name_reversed."""
    return ".".join(reversed(host.split(".")))


def unreverse_host(rev: str) -> str:
    """'com.example.www' -> 'www.example.com' (reversal is its own inverse)."""
    return ".".join(reversed(rev.split(".")))


def strip_www(host: str) -> str:
    """Drop one leading 'www.' as CC's older graph releases do; 'www.com' stays (nothing would be left)."""
    if host.startswith(WWW_PREFIX) and "." in host[len(WWW_PREFIX) :]:
        return host[len(WWW_PREFIX) :]
    return host


def www_key(host: str) -> str:
    """Key under which 'example.com' and 'www.example.com' meet, whatever the release's convention."""
    return strip_www(normalize_host(host))


def www_variants(host: str) -> tuple[str, ...]:
    """The normal host first, then its other www spelling, for lookups across both conventions."""
    normal = normalize_host(host)
    bare = strip_www(normal)
    if bare != normal:
        return (normal, bare)
    if _is_ip(normal) or "." not in normal:
        return (normal,)
    return (normal, WWW_PREFIX + normal)


def same_host(a: str, b: str) -> bool:
    """True when two spellings name the same host up to case, port, IDNA and a leading www."""
    return www_key(a) == www_key(b)


def surt_host(host: str) -> str:
    """SURT host as CC's host index keys it: 'www.commoncrawl.org' -> 'org,commoncrawl' (IPs stay)."""
    normal = normalize_host(host)
    if _is_ip(normal):
        return normal
    return ",".join(reversed(SURT_WWW_RE.sub("", normal, count=1).split(".")))


def unsurt_host(surt: str) -> str:
    """'org,commoncrawl' -> 'commoncrawl.org' (the www that SURT stripped cannot come back)."""
    surt = surt.strip().rstrip(")")
    if "," not in surt:
        return surt.lower()
    return ".".join(reversed(surt.lower().split(",")))


def registered_domain(host: str, include_private: bool = False) -> str:
    """Registered domain per the bundled Public Suffix List (ICANN section unless include_private).

    IP addresses map to themselves; names under a suffix the list does not know (test names such as
    'news-17.example', 'localhost') fall back to their last two labels.
    """
    normal = normalize_host(host)
    if _is_ip(normal):
        return normal
    parts = _extractor()(normal, include_psl_private_domains=include_private)
    if parts.suffix and parts.domain:
        return f"{parts.domain}.{parts.suffix}"
    if parts.suffix:  # the host is itself a public suffix ('co.uk')
        return normal
    return ".".join(normal.split(".")[-2:])


def public_suffix(host: str, include_private: bool = False) -> str:
    """The public suffix of a host ('' when the list knows none)."""
    normal = normalize_host(host)
    if _is_ip(normal):
        return ""
    return str(_extractor()(normal, include_psl_private_domains=include_private).suffix)


@functools.cache
def _extractor() -> tldextract.TLDExtract:
    """The bundled PSL snapshot, parsed once; no URL list and no cache dir, so never any network."""
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


def _is_ip(host: str) -> bool:
    if not host or not (host[0].isdigit() or ":" in host):
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
