"""Misbehaving hosts: the byte-level tricks each hostile kind plays on a crawler."""

from __future__ import annotations

import hashlib
import random
import struct
import zlib
from collections.abc import Iterator

from crawler.testweb.politeness_hosts import GO_PATHS

HOSTILE_KINDS = (
    "slow",
    "error5xx",
    "ratelimit",
    "reset",
    "redirect_loop",
    "calendar",
    "huge",
    "gzip_bomb",
    "bad_charset",
    "binary",
    "malformed",
)
MIN_HOSTS_FOR_EVERY_KIND = 40  # from this many hosts on, each hostile kind gets at least one host

# Paths a hostile host's home page links to, so a crawler following links will hit them.
HOSTILE_PATHS: dict[str, tuple[str, ...]] = {
    "error5xx": ("/broken.html",),
    "reset": ("/download/report.html",),
    "redirect_loop": ("/loop/a",),
    "calendar": ("/calendar/2024/01",),
    "huge": ("/huge/stream", "/huge/length"),
    "gzip_bomb": ("/bomb.html",),
    "binary": ("/image.html",),
    "redirect_private": GO_PATHS,  # politeness_hosts.py: redirects to private and CGNAT targets
}
ERROR_STATUSES = (500, 502, 503)
HUGE_BYTES = 50 * 1024 * 1024
HUGE_CHUNK = 64 * 1024
BOMB_INFLATED = 1024 * 1024 * 1024  # deflate tops out near 1:1000, so the body is about 1 MB
BOMB_BLOCK = 1024 * 1024
BINARY_BYTES = 16 * 1024
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CALENDAR_YEARS = (1, 9999)
STRAY_BYTES = (b"\x00", b"\xff\xfe", b"\x1b[0m", b"\xc3\x28", b"&#xD800;")


def page_hash(seed: int, host: str, path: str) -> float:
    """A stable number in [0, 1) per page, for choosing which pages misbehave."""
    digest = hashlib.blake2b(f"{seed}/{host}/{path}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def build_gzip_bomb(inflated: int = BOMB_INFLATED) -> bytes:
    """A gzip member of zeros: one full-flushed deflate block repeated, built in well under 1 s."""
    zeros = bytes(BOMB_BLOCK)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    end = comp.flush(zlib.Z_FINISH)
    n_blocks = max(1, inflated // BOMB_BLOCK)
    crc = 0
    for _ in range(n_blocks):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    size = n_blocks * BOMB_BLOCK
    return header + block * n_blocks + end + struct.pack("<II", crc, size & 0xFFFFFFFF)


def huge_chunks(total: int = HUGE_BYTES) -> Iterator[bytes]:
    """An endless-looking HTML page, `total` bytes in HUGE_CHUNK pieces."""
    line = b"<p>More items are loading. Keep scrolling for more items.</p>\n"
    chunk = (line * (HUGE_CHUNK // len(line) + 1))[:HUGE_CHUNK]
    head = b"<!DOCTYPE html><html><head><title>Everything</title></head><body>\n"
    sent = 0
    first = head + chunk[len(head) :]
    while sent < total:
        piece = first if sent == 0 else chunk
        piece = piece[: total - sent]
        sent += len(piece)
        yield piece


def binary_body(rng: random.Random) -> bytes:
    """Random bytes, half the time behind a PNG signature, to be served as text/html."""
    data = rng.randbytes(BINARY_BYTES)
    return PNG_MAGIC + data if rng.random() < 0.5 else data


def malform(html: str, rng: random.Random) -> bytes:
    """Break nesting, drop closing tags and sprinkle stray bytes, keeping the text readable."""
    for tag in ("</p>", "</li>", "</div>", "</ul>", "</td>"):
        if rng.random() < 0.6:
            html = html.replace(tag, "")
    html = html.replace("<h1>", "<h1><b><i>", 1).replace("</h1>", "</b></h1></i>", 1)
    html = html.replace("<body>", '<body><div class="wrap" id=main <table><tr>', 1)
    html = html.replace("</html>", "<p>unclosed <a href='/x>link", 1)
    raw = html.encode("utf-8")
    parts = raw.split(b"\n")
    for i in rng.sample(range(len(parts)), k=min(4, len(parts))):
        parts[i] += rng.choice(STRAY_BYTES)
    return b"\n".join(parts)


def mis_encode(html: str, declared_utf8: bool) -> tuple[bytes, str]:
    """Body bytes and the charset the headers will claim, which disagree."""
    if declared_utf8:
        return html.encode("cp1252", errors="replace"), "utf-8"
    return html.encode("utf-8"), "windows-1252"


def calendar_month(path: str) -> tuple[int, int] | None:
    """(year, month) for /calendar/YYYY/MM inside the calendar's (unbounded-looking) range."""
    parts = path.strip("/").split("/")
    if len(parts) != 3 or parts[0] != "calendar" or not (parts[1] + parts[2]).isdigit():
        return None
    year, month = int(parts[1]), int(parts[2])
    if not CALENDAR_YEARS[0] <= year <= CALENDAR_YEARS[1] or not 1 <= month <= 12:
        return None
    return year, month


def neighbour_months(year: int, month: int) -> tuple[str, str]:
    prev = (year, month - 1) if month > 1 else (year - 1, 12)
    nxt = (year, month + 1) if month < 12 else (year + 1, 1)
    return f"/calendar/{prev[0]:04d}/{prev[1]:02d}", f"/calendar/{nxt[0]:04d}/{nxt[1]:02d}"
