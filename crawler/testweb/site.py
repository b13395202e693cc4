"""Routing and rendering: turns (host, path) into the bytes a real site of that kind would send."""

from __future__ import annotations

import random
from html import escape
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from crawler.testweb import directive_hosts as dx
from crawler.testweb import hostile as hx
from crawler.testweb.duplicates import TWIN_PREFIX
from crawler.testweb.graded_text import MEDIOCRE_TYPES, mediocre_content, short_high_content
from crawler.testweb.politeness_hosts import POLITENESS_KINDS, politeness_route
from crawler.testweb.specs import Rendered
from crawler.testweb.templates import Frame, main_html, page
from crawler.testweb.text import Lexicon, MainContent, high_content, low_content, sentence, title_for

if TYPE_CHECKING:
    from crawler.testweb.specs import HostSpec, SiteView

HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
XML_TYPE = "application/xml"
GZIP_TYPE = "application/gzip"
JSON_TYPE = "application/json"
LISTING_PAGE_SIZE = 20
SITEMAP_CHUNK = 1000  # URLs per sitemap file; bigger hosts get a sitemap index
HOME_LATEST = 12
RELATED_PAGES = 5
SIDEBAR_POPULAR = 5
LINK_FARM_POOL = 30
BOILERPLATE_PATHS = ("/about", "/contact", "/privacy", "/terms")
RESET_SHARE = 0.5  # pages of a `reset` host that break: half before the headers, half mid-body
BINARY_SHARE = 0.5  # pages of a `binary` host served as random bytes


def _html(status: int, html: str, **kw: object) -> Rendered:
    return Rendered(status, {"Content-Type": HTML_TYPE}, html.encode("utf-8"), **kw)  # type: ignore[arg-type]


def _text(status: int, text: str | bytes, ctype: str = TEXT_TYPE) -> Rendered:
    body = text.encode("utf-8") if isinstance(text, str) else text
    return Rendered(status, {"Content-Type": ctype}, body)


class _Page:
    """What every page of one host shares: lexicon, frame and the host's random choices."""

    def __init__(self, model: SiteView, spec: HostSpec, key: str) -> None:
        self.model, self.spec = model, spec
        self.lex: Lexicon = model.lexicons[spec.language]
        self.rng = random.Random(f"{model.cfg.seed}/{spec.name}/{key}")

    def title(self, j: int) -> str:
        rng = random.Random(f"{self.model.cfg.seed}/{self.spec.name}/{j}/title")
        return title_for(rng, self.lex, self.lex.topics[self.spec.kind])

    def frame(self, partners: list[str] | None = None) -> Frame:
        spec, ui, rng = self.spec, self.lex.ui, self.rng
        popular = [rng.randrange(spec.n_pages) for _ in range(SIDEBAR_POPULAR)]
        word = rng.choice(self.lex.topics[spec.kind])
        return Frame(
            host=spec.name,
            language=spec.language,
            family=spec.template,
            prefix=spec.class_prefix,
            cookie_banner=spec.cookie_banner,
            nav=[("/", ui["home"])]
            + [(p, p.strip("/").replace("/", " ")) for p in hx.HOSTILE_PATHS.get(spec.hostile or "", ())]
            + [(f"/{s}/", s.capitalize()) for s in spec.sections],
            sidebar=[(spec.page_path(j), self.title(j)) for j in popular] + [(f"/search?q={word}", word)],
            partners=[(u, u.split("/")[2]) for u in partners or []],
            footer=[(p, ui[p.strip("/")]) for p in BOILERPLATE_PATHS] + [("/private/login", ui["login"])],
        )

    def wrap(self, title: str, main: str, partners: list[str] | None = None, head: str = "") -> str:
        return page(self.frame(partners), self.lex, self.rng, title, main, head)


def _content(model: SiteView, spec: HostSpec, j: int) -> Rendered:
    pg = _Page(model, spec, str(j))
    high, low_type = model.page_label(spec, j)
    copy = model.duplicate(spec, j)
    twin = ""
    if copy is not None and copy[0] != "twin":
        content = _copied_content(model, copy, pg)
    elif high:
        short = model.graded is not None and model.page_kind(spec, j) == "short_high"
        content = (short_high_content if short else high_content)(pg.rng, pg.lex, spec.kind)
        content.title = pg.title(j)
        if copy is not None:
            twin = f'<p><a href="{TWIN_PREFIX}{spec.page_path(j)}">AMP</a></p>'
    elif low_type in MEDIOCRE_TYPES:
        content = mediocre_content(pg.rng, pg.lex, spec.kind, low_type)
        content.title = pg.title(j) if low_type != "seo_filler" else content.title
    else:
        pool = [spec.page_path(pg.rng.randrange(spec.n_pages)) for _ in range(LINK_FARM_POOL)]
        content = low_content(pg.rng, pg.lex, spec.kind, low_type or "thin", pool)
    k = len(spec.sections)
    related = [(j + k * d) % spec.n_pages for d in range(1, RELATED_PAGES + 1)]
    kind = dx.page_kind(spec, j)
    extra = (
        f'<div class="related"><h3>{escape(pg.lex.ui["related"])}</h3><ul>'
        + "".join(f'<li><a href="{spec.page_path(r)}">{escape(pg.title(r))}</a></li>' for r in related)
        + f'</ul></div><p><a href="/private/edit/{j}">{escape(pg.lex.ui["edit"])}</a></p>'
        + twin
    )
    if dx.rel_nofollow_link(spec, j) or kind in dx.NOFOLLOW_KINDS:
        rel = ' rel="nofollow"' if kind is None else ""  # a nofollow page's own links need no rel
        extra += f'<p><a href="{dx.hidden_path(j)}"{rel}>{escape(pg.title(j))}</a></p>'
    head = dx.head_tags(kind)
    html = pg.wrap(content.title, main_html(content, extra), model.cross_links(spec, j), head)
    r = _html(200, html, label=high, low_type=low_type, main_text=content.text())
    r.headers.update(dx.headers(kind))
    return r


def _copied_content(model: SiteView, copy: tuple[str, HostSpec, int], pg: _Page) -> MainContent:
    """The original's main content; a near copy gets a new title and one sentence more."""
    kind, host, j = copy
    original = _Page(model, host, str(j))
    content = high_content(original.rng, original.lex, host.kind)
    content.title = original.title(j)
    if kind == "near":
        content.title = title_for(pg.rng, original.lex, original.lex.topics[host.kind])
        tag, first = content.blocks[0]
        added = sentence(pg.rng, original.lex, original.lex.topics[host.kind])
        content.blocks[0] = (tag, f"{first} {added}")
    return content


def _listing(model: SiteView, spec: HostSpec, section: str, page_no: int) -> Rendered:
    k, si = len(spec.sections), spec.sections.index(section)
    count = (spec.n_pages - si + k - 1) // k
    n_listing = max(1, (count + LISTING_PAGE_SIZE - 1) // LISTING_PAGE_SIZE)
    if not 1 <= page_no <= n_listing:
        return _not_found(model, spec)
    pg = _Page(model, spec, f"{section}?{page_no}")
    first = (page_no - 1) * LISTING_PAGE_SIZE
    js = [si + k * t for t in range(first, min(count, first + LISTING_PAGE_SIZE))]
    items = "".join(f'<li><a href="{spec.page_path(j)}">{escape(pg.title(j))}</a></li>' for j in js)
    nav = ""
    if page_no > 1:
        nav += f'<a rel="prev" href="/{section}/?page={page_no - 1}">{pg.lex.ui["prev"]}</a> '
    if page_no < n_listing:
        nav += f'<a rel="next" href="/{section}/?page={page_no + 1}">{pg.lex.ui["next"]}</a>'
    title = section.capitalize()
    main = f'<h1>{title}</h1><ul class="listing">{items}</ul><p class="pager">{nav}</p>'
    return _html(200, pg.wrap(title, main))


def _home(model: SiteView, spec: HostSpec) -> Rendered:
    pg = _Page(model, spec, "home")
    ui = pg.lex.ui
    latest = range(min(HOME_LATEST, spec.n_pages))
    items = "".join(f'<li><a href="{spec.page_path(j)}">{escape(pg.title(j))}</a></li>' for j in latest)
    traps = hx.HOSTILE_PATHS.get(spec.hostile or "", ())
    trap_links = "".join(f'<li><a href="{p}">{escape(p.strip("/"))}</a></li>' for p in traps)
    main = (
        f"<h1>{escape(spec.name)}</h1><h2>{escape(ui['latest'])}</h2><ul>{items}</ul>"
        + (f'<ul class="more">{trap_links}</ul>' if trap_links else "")
        + "".join(f'<p><a href="{p}">{escape(p)}</a></p>' for p in dx.redirects(spec))
        + f'<p><a href="/private/account">{escape(ui["account"])}</a></p>'
    )
    return _html(200, pg.wrap(spec.name, main))


def _thin(model: SiteView, spec: HostSpec, key: str, title: str, links: list[str]) -> Rendered:
    pg = _Page(model, spec, key)
    items = "".join(f'<li><a href="{p}">{escape(p)}</a></li>' for p in links)
    main = main_html(MainContent(title=title, blocks=[("p", pg.lex.ui["empty"])])) + f"<ul>{items}</ul>"
    return _html(200, pg.wrap(title, main))


def _not_found(model: SiteView, spec: HostSpec) -> Rendered:
    r = _thin(model, spec, "404", "404", ["/"])
    r.status = 404
    return r


def _sitemap(spec: HostSpec, path: str) -> Rendered | None:
    base = f"http://{spec.name}"
    urls = [f"{base}/"] + [f"{base}/{s}/" for s in spec.sections]
    urls += [base + spec.page_path(j) for j in range(spec.n_pages)]
    n_chunks = (len(urls) + SITEMAP_CHUNK - 1) // SITEMAP_CHUNK
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    if path == "/sitemap.xml" and n_chunks > 1:
        locs = "".join(
            f"<sitemap><loc>{base}/sitemap-{i}.xml</loc></sitemap>\n" for i in range(1, n_chunks + 1)
        )
        return _text(200, f"{head}<sitemapindex {ns}>\n{locs}</sitemapindex>\n", XML_TYPE)
    if path == "/sitemap.xml":
        chunk = urls
    else:
        num = path.removeprefix("/sitemap-").removesuffix(".xml")
        if not num.isdigit() or not 1 <= int(num) <= n_chunks or n_chunks == 1:
            return None
        chunk = urls[(int(num) - 1) * SITEMAP_CHUNK : int(num) * SITEMAP_CHUNK]
    locs = "".join(f"<url><loc>{u}</loc></url>\n" for u in chunk)
    return _text(200, f"{head}<urlset {ns}>\n{locs}</urlset>\n", XML_TYPE)


def _route(model: SiteView, spec: HostSpec, path: str, query: dict[str, list[str]]) -> Rendered:
    if path == "/robots.txt":
        body = model.robots_txt(spec)
        return _text(404, "Not Found\n") if body is None else _text(200, body)
    if path.startswith("/sitemap") and path.endswith(".xml"):
        return _sitemap(spec, path) or _not_found(model, spec)
    if spec.directives and (r := _directive_route(model, spec, path)) is not None:
        return r
    if path == "/":
        return _home(model, spec)
    if path in BOILERPLATE_PATHS:
        return _thin(model, spec, path, path.strip("/").capitalize(), ["/"])
    if path.startswith("/private/"):
        return _thin(model, spec, "private", "Sign in", ["/private/reset-password", "/"])
    if path == "/search":
        pg = random.Random(f"{model.cfg.seed}/{spec.name}/{query.get('q', [''])[0]}")
        hits = [spec.page_path(pg.randrange(spec.n_pages)) for _ in range(RELATED_PAGES)]
        return _thin(model, spec, "search", "Search", hits)
    parts = path.split("/")
    if len(parts) == 3 and parts[1] in spec.sections and parts[2] == "":
        page_no = query.get("page", ["1"])[0]
        return _listing(model, spec, parts[1], int(page_no) if page_no.isdigit() else 0)
    if path.startswith(TWIN_PREFIX + "/"):
        original = path.removeprefix(TWIN_PREFIX)
        parts = original.split("/")
        j = int(parts[2][:-5]) if len(parts) == 3 and parts[2][:-5].isdigit() else -1
        copy = model.duplicate(spec, j) if 0 <= j < spec.n_pages and spec.page_path(j) == original else None
        return _content(model, spec, j) if copy and copy[0] == "twin" else _not_found(model, spec)
    if len(parts) == 3 and parts[2].endswith(".html") and parts[2][:-5].isdigit():
        j = int(parts[2][:-5])
        if j < spec.n_pages and spec.page_path(j) == path:
            return _content(model, spec, j)
    return _not_found(model, spec)


def _directive_route(model: SiteView, spec: HostSpec, path: str) -> Rendered | None:
    """What only directive hosts serve: gzipped sitemaps, tdmrep.json, redirects, hidden pages."""
    if path.startswith("/sitemap") and path.endswith(".xml.gz"):
        xml = _sitemap(spec, path.removesuffix(".gz"))
        return None if xml is None else _text(200, dx.gzip_sitemap(xml.body), GZIP_TYPE)
    if path == dx.TDMREP_PATH:
        body = dx.tdmrep_json(spec)
        return _text(404, "Not Found\n") if body is None else _text(200, body, JSON_TYPE)
    target = dx.redirects(spec).get(path)
    if target is not None:
        status = 302 if path.startswith("/go/") else 301
        return Rendered(
            status, {"Location": f"http://{spec.name}{target}", "Content-Type": TEXT_TYPE}, b"Moved\n"
        )
    name = path.removeprefix(dx.HIDDEN_PREFIX).removesuffix(".html")
    if path.startswith(dx.HIDDEN_PREFIX) and name.isdigit() and int(name) < spec.n_pages:
        return _content(model, spec, int(name))  # a twin of page j, linked only through nofollow
    return None


def _hostile_route(
    model: SiteView, spec: HostSpec, path: str, query: dict[str, list[str]]
) -> Rendered | None:
    """Responses that exist only on hostile hosts (traps), or None to route normally."""
    kind, base = spec.hostile, f"http://{spec.name}"
    if kind == "redirect_loop" and path in ("/loop/a", "/loop/b"):
        # a <-> b forever; the round counter keeps each hop new, so dupe filters cannot end it
        rnd = query.get("r", ["0"])[0]
        n = int(rnd) if rnd.isdigit() else 0
        target = f"/loop/b?r={n}" if path == "/loop/a" else f"/loop/a?r={n + 1}"
        return Rendered(302, {"Location": base + target, "Content-Type": TEXT_TYPE}, b"Moved\n")
    if kind == "calendar" and (ym := hx.calendar_month(path)):
        prev, nxt = hx.neighbour_months(*ym)
        return _thin(model, spec, path, f"{ym[0]:04d}-{ym[1]:02d}", [prev, nxt])
    if kind == "huge" and path in ("/huge/stream", "/huge/length"):
        effect = "huge_stream" if path == "/huge/stream" else "huge_length"
        return Rendered(200, {"Content-Type": HTML_TYPE}, b"", effect=effect)
    if kind == "gzip_bomb" and path == "/bomb.html":
        headers = {"Content-Type": HTML_TYPE, "Content-Encoding": "gzip"}
        return Rendered(200, headers, b"", effect="gzip_bomb")
    if kind == "binary" and path == "/image.html":
        return Rendered(200, {"Content-Type": HTML_TYPE}, hx.binary_body(random.Random(path)))
    if kind == "error5xx" and path == "/broken.html":
        return _html(500, "<h1>500 Internal Server Error</h1>")
    if kind == "reset" and path == "/download/report.html":
        r = _content(model, spec, 0)
        r.effect = "reset"
        return r
    return None


def _hostile_after(model: SiteView, spec: HostSpec, path: str, r: Rendered) -> Rendered:
    """Spoil an ordinary response the way the host's hostile kind does."""
    kind, h = spec.hostile, hx.page_hash(model.cfg.seed, spec.name, path)
    is_html = r.headers.get("Content-Type") == HTML_TYPE and r.effect is None and r.body
    if kind == "slow" and path != "/robots.txt":
        # slow pages, a static robots.txt: an unreachable robots.txt is a disallow (RFC 9309), which
        # the politeness hosts test; this host tests timeouts on pages
        r.delay = spec.slow_delay
    elif kind == "ratelimit" and path != "/robots.txt":
        r.effect = "ratelimit"
        r.extra["retry_after"] = str(spec.retry_after)
    elif kind == "error5xx" and path not in ("/", "/robots.txt") and h < model.cfg.error_share:
        status = hx.ERROR_STATUSES[int(h * 1e6) % len(hx.ERROR_STATUSES)]
        return _html(status, f"<h1>{status} Server Error</h1>")
    elif kind == "reset" and r.label is not None and r.effect is None and h < RESET_SHARE:
        r.effect = "reset_early" if h < RESET_SHARE / 2 else "reset"
    elif kind == "binary" and r.label is not None and h < BINARY_SHARE:
        r.body = hx.binary_body(random.Random(f"{spec.name}{path}"))
    elif kind == "bad_charset" and is_html:
        declared_utf8 = spec.index % 2 == 0
        html = r.body.decode("utf-8")
        if not declared_utf8:
            html = html.replace('<meta charset="utf-8">', '<meta charset="windows-1252">', 1)
        r.body, charset = hx.mis_encode(html, declared_utf8)
        r.headers["Content-Type"] = f"text/html; charset={charset}"
    elif kind == "malformed" and is_html:
        r.body = hx.malform(r.body.decode("utf-8"), random.Random(f"{spec.name}{path}"))
    return r


def render(model: SiteView, host: str, path: str) -> Rendered:
    """The response to `GET http://host/path` (may carry a query), minus transport effects."""
    spec = model.host(host)
    if spec is None:
        return _text(502, f"502 Bad Gateway: unknown host {host}\n")
    split = urlsplit(path)
    p, query = split.path or "/", parse_qs(split.query)
    if spec.hostile in POLITENESS_KINDS and (special := politeness_route(model, spec, p)) is not None:
        return special
    r = _hostile_route(model, spec, p, query) if spec.hostile else None
    if r is None:
        r = _route(model, spec, p, query)
    return _hostile_after(model, spec, p, r) if spec.hostile else r
