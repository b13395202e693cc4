"""What the test web's parts share: a host's description (HostSpec), one response (Rendered), and the
view of the whole web that rendering reads (SiteView, which crawler/testweb/model.py's SiteModel is)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from crawler.testweb.config import TestWebConfig
    from crawler.testweb.graded import GradedPages
    from crawler.testweb.text import Lexicon


@dataclass(slots=True)
class HostSpec:
    """One virtual host and its ground truth."""

    name: str
    index: int
    kind: str
    language: str
    q: float
    n_pages: int
    n_high: int
    hostile: str | None
    crawl_delay: float | None
    robots_source: str  # "generated", "missing" (404) or "real:<file name>"
    disallow: tuple[str, ...]
    in_links: int
    template: str
    class_prefix: str
    cookie_banner: bool
    sections: tuple[str, ...]
    slow_delay: float = 0.0
    retry_after: int = 1
    badbot_group: bool = False
    directives: bool = False  # pages carry robots directives and opt-outs (testweb/directive_hosts.py)

    @property
    def home(self) -> str:
        return f"http://{self.name}/"

    def page_path(self, j: int) -> str:
        return f"/{self.sections[j % len(self.sections)]}/{j}.html"


@dataclass(slots=True)
class Rendered:
    """One response as the model sees it; `effect` names what the server adds at transport level."""

    status: int
    headers: dict[str, str]
    body: bytes
    label: bool | None = None  # high quality? None for pages that are not content pages
    low_type: str | None = None
    main_text: str = ""
    effect: str | None = None  # ratelimit|reset|reset_early|huge_stream|huge_length|gzip_bomb
    delay: float = 0.0
    extra: dict[str, str] = field(default_factory=dict)


class SiteView(Protocol):
    """The web as the renderers read it (SiteModel)."""

    cfg: TestWebConfig
    hosts: list[HostSpec]
    lexicons: dict[str, Lexicon]
    graded: GradedPages | None

    def host(self, name: str) -> HostSpec | None: ...

    def duplicate(self, spec: HostSpec, j: int) -> tuple[str, HostSpec, int] | None: ...

    def page_kind(self, spec: HostSpec, j: int) -> str: ...

    def page_label(self, spec: HostSpec, j: int) -> tuple[bool, str | None]: ...

    def cross_links(self, spec: HostSpec, j: int) -> list[str]: ...

    def robots_txt(self, spec: HostSpec) -> bytes | None: ...
