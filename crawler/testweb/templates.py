"""HTML templates around the main text (nav, sidebar, ads, footer, cookies), so cleaning matters."""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape

from crawler.testweb.text import Lexicon, MainContent

FAMILIES = ("semantic", "divsoup", "legacy")
CLASS_PREFIXES = ("site", "c", "wp", "td", "x", "main")
ADS_PER_PAGE = (0, 3)

Link = tuple[str, str]  # (href, anchor text)


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything around the main text of one page."""

    host: str
    language: str
    family: str
    prefix: str
    cookie_banner: bool
    nav: list[Link]
    sidebar: list[Link]
    partners: list[Link]
    footer: list[Link]
    charset: str = "utf-8"


def _links(links: list[Link], css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    items = "".join(f'<li><a href="{escape(h)}">{escape(t)}</a></li>' for h, t in links)
    return f"<ul{cls}>{items}</ul>"


def main_html(content: MainContent, extra: str = "") -> str:
    """The main content as HTML: h1, paragraphs, subheadings, bulleted lists and link lists."""
    out = [f"<h1>{escape(content.title)}</h1>"]
    in_list = False
    for tag, text in content.blocks:
        if tag == "li" and not in_list:
            out.append("<ul>")
            in_list = True
        elif tag != "li" and in_list:
            out.append("</ul>")
            in_list = False
        out.append(f"<{tag}>{escape(text)}</{tag}>")
    if in_list:
        out.append("</ul>")
    if content.links:
        out.append(_links(content.links))
    out.append(extra)
    return "\n".join(out)


def _ads(rng: random.Random, lex: Lexicon, p: str) -> list[str]:
    ads = []
    for _ in range(rng.randint(*ADS_PER_PAGE)):
        ad_id = rng.randrange(10_000)
        words = f"{rng.choice(lex.spam)} {rng.choice(lex.noun)}"
        ads.append(
            f'<div class="{p}-ad ad-slot" data-ad="{ad_id}">'
            f"<span>{escape(lex.ui['advert'])}</span> "
            f'<a href="/private/ads?id={ad_id}" rel="nofollow sponsored">'
            f"{escape(lex.ui['sponsored'])}: {escape(words)}</a></div>"
        )
    return ads


def page(frame: Frame, lex: Lexicon, rng: random.Random, title: str, main: str, head: str = "") -> str:
    """Wrap main-content HTML in the host's template family; `head` goes into <head> (meta tags)."""
    p, ui = frame.prefix, lex.ui
    ads = _ads(rng, lex, p)
    cookie = (
        f'<div id="cookie-consent" class="{p}-cookie"><p>{escape(ui["cookies"])}</p>'
        f"<button>{escape(ui['accept'])}</button> "
        f'<a href="/privacy">{escape(ui["settings"])}</a></div>'
        if frame.cookie_banner
        else ""
    )
    side = (
        f"<h3>{escape(ui['popular'])}</h3>{_links(frame.sidebar)}"
        + (f"<h3>{escape(ui['partners'])}</h3>{_links(frame.partners)}" if frame.partners else "")
        + "".join(ads[1:])
    )
    top_ad = ads[0] if ads else ""
    search = (
        f'<form action="/search" method="get"><input type="text" name="q" '
        f'placeholder="{escape(ui["search"])}"></form>'
    )
    foot = (
        f"<p>&copy; 2024 {escape(frame.host)}. {escape(ui['copyright'])}</p>"
        f"{_links(frame.footer)}<p>{escape(ui['newsletter'])}</p>"
    )
    logo = f'<a href="/" class="{p}-logo">{escape(frame.host)}</a>'
    if frame.family == "semantic":
        body = (
            f"{cookie}<header>{logo}<nav>{_links(frame.nav)}</nav>{search}</header>\n{top_ad}\n"
            f"<main><article>\n{main}\n</article></main>\n<aside>{side}</aside>\n"
            f"<footer>{foot}</footer>"
        )
    elif frame.family == "divsoup":
        body = (
            f'{cookie}<div class="{p}-wrapper"><div class="{p}-header">{logo}'
            f'<div class="{p}-menu">{_links(frame.nav, p + "-menu-list")}</div>{search}</div>\n'
            f'<div class="{p}-row"><div class="{p}-col {p}-col-8"><div class="{p}-content">{top_ad}'
            f'<div class="{p}-post-body entry-content">\n{main}\n</div></div></div>\n'
            f'<div class="{p}-col {p}-col-4 {p}-sidebar">{side}</div></div>\n'
            f'<div class="{p}-footer">{foot}</div></div>'
        )
    else:
        body = (
            f'{cookie}<table width="100%" cellpadding="4"><tr><td colspan="2" class="top">{logo}'
            f'{search}</td></tr>\n<tr><td class="menu" valign="top">{_links(frame.nav)}</td>'
            f'<td class="body" valign="top">{top_ad}\n{main}\n</td>'
            f'<td class="right">{side}</td></tr>'
            f'\n<tr><td colspan="3" class="bottom">{foot}</td></tr></table>'
        )
    return (
        f'<!DOCTYPE html>\n<html lang="{frame.language}"><head>'
        f'<meta charset="{frame.charset}"><title>{escape(title)} | {escape(frame.host)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{head}</head>\n'
        f"<body>\n{body}\n</body></html>\n"
    )
