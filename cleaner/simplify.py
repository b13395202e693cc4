"""Raw HTML -> ordered text blocks with ids, the one simplification every block labeller shares."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

# Work per page is capped so one huge page cannot stall a worker: characters parsed, blocks kept.
MAX_HTML_CHARS = 3_000_000
MAX_BLOCKS = 6_000
# Characters of one block's text kept for features and output (an inlined data blob is not prose).
MAX_BLOCK_CHARS = 100_000
# Up to this many enclosing block containers are recorded per block for neighbourhood features.
MAX_CONTAINERS = 4
# Lexbor's parse time grows with the square of nesting depth; deeper markup is cut before parsing.
MAX_DEPTH = 2_000
# Pages with fewer tags than this cannot nest deep enough to matter, so they skip the depth scan.
DEPTH_SCAN_MIN_TAGS = 2 * MAX_DEPTH
TAG_RE = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*?(/?)>")
# Elements that never nest (void) or close themselves implicitly, so they do not deepen the tree.
FLAT_TAGS = frozenset(
    str.split("area base br col embed hr img input link meta source track wbr p li td th tr dt dd option")
)
# Class/id tokens kept per block from its nearest ancestors, for learned token scores.
MAX_TOKEN_ANCESTORS = 4

DROP_TAGS = frozenset(
    {
        "script", "style", "template", "svg", "math", "iframe", "object", "embed", "canvas", "video",
        "audio", "select", "option", "input", "textarea", "head", "link", "meta", "img", "picture",
        "source", "track", "map", "area", "dialog",
    }
)  # fmt: skip
INLINE_TAGS = frozenset(
    {
        "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "mark",
        "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr", "label",
        "big", "tt", "strike", "del", "ins", "nobr",
    }
)  # fmt: skip
# Kept whole as one block unless they hold paragraph-like structure (then they are layout).
ATOMIC_TAGS = frozenset({"ul", "ol", "dl", "table", "pre"})
ATOMIC_BREAKERS = "p, div, table, h1, h2, h3, h4, h5, h6, article, section, blockquote, form, pre"
BREAKER_TAGS = frozenset(t.strip() for t in ATOMIC_BREAKERS.split(","))
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}

# Ancestor flags: structural context a block inherits from the elements around it.
F_HIDDEN = 1 << 0
F_NOSCRIPT = 1 << 1
F_MAIN = 1 << 2
F_ARTICLE = 1 << 3
F_NAV = 1 << 4
F_HEADER = 1 << 5
F_FOOTER = 1 << 6
F_ASIDE = 1 << 7
F_FORM = 1 << 8
F_LI = 1 << 9
F_TD = 1 << 10
F_BLOCKQUOTE = 1 << 11
F_BUTTON = 1 << 12
F_DETAILS = 1 << 13
F_FIGURE = 1 << 14
F_SECTION = 1 << 15
N_FLAGS = 16
TAG_FLAGS = {
    "noscript": F_NOSCRIPT, "main": F_MAIN, "article": F_ARTICLE, "nav": F_NAV, "header": F_HEADER,
    "footer": F_FOOTER, "aside": F_ASIDE, "form": F_FORM, "li": F_LI, "td": F_TD, "th": F_TD,
    "blockquote": F_BLOCKQUOTE, "button": F_BUTTON, "details": F_DETAILS, "figure": F_FIGURE,
    "section": F_SECTION,
}  # fmt: skip
# Class/id words of page sections that sit beside an article but are not it. Any ancestor carrying one marks
# the block (the nearest tokens alone miss a comment list's outer wrapper); one bit per section kind.
SECTION_WORDS: dict[str, frozenset[str]] = {
    "comment": frozenset(str.split("comment comments commentlist respond disqus discussion replies reply")),
    "related": frozenset(str.split("related recommended recommendations recirc recirculation suggested "
                                   "outbrain taboola readmore morestories popular trending mostread")),
    "teaser": frozenset(str.split("teaser teasers card cards tile tiles feed stream promo promos")),
    "newsletter": frozenset(str.split("newsletter newsletters subscribe subscription signup optin "
                                      "mailchimp")),
}  # fmt: skip
SECTION_BITS = {word: 1 << i for i, words in enumerate(SECTION_WORDS.values()) for word in words}
HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")
CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


@dataclass(slots=True)
class Block:
    """One text run between block boundaries (or a whole list/table/pre) and its context."""

    id: int
    text: str
    tag: str  # the element that owns the run, or the atomic element itself
    flags: int  # F_* bits inherited from ancestors
    depth: int
    n_words: int
    n_link_words: int
    n_links: int
    containers: tuple[int, ...]  # enclosing block elements, nearest first
    tokens: tuple[str, ...]  # class/id tokens of the nearest ancestors that have any
    own_tokens: tuple[str, ...]  # class/id tokens of the owning element
    nodes: list[LexborNode]  # text nodes of a run, or [element] for an atomic block
    atomic: bool = False
    sections: int = 0  # SECTION_WORDS bits of all ancestors


@dataclass(slots=True)
class SimplePage:
    """A simplified page: its blocks in reading order and per-container word totals."""

    blocks: list[Block]
    title: str
    container_words: list[int]
    container_link_words: list[int]
    container_blocks: list[int]
    tree: LexborHTMLParser | None = None
    truncated: bool = False
    reason: str | None = None  # why a page has no blocks (empty, no body, ...)
    n_words: int = field(default=0)
    source: str = ""  # the (capped) HTML, for labellers that work on markup


@dataclass(slots=True)
class _Frame:
    tag: str
    flags: int
    link: bool
    container: int  # id of the nearest block container (itself when block-level)
    containers: tuple[int, ...]
    tokens: tuple[str, ...]
    own_tokens: tuple[str, ...]
    depth: int
    block: bool
    sections: int = 0


def class_tokens(attrs: dict[str, str | None]) -> tuple[str, ...]:
    """Lower-case word pieces of an element's class and id (`postBody-main` -> post, body, main)."""
    raw = f"{attrs.get('class') or ''} {attrs.get('id') or ''}"
    if not raw.strip():
        return ()
    raw = CAMEL.sub(" ", raw).lower()
    return tuple(t for t in TOKEN_SPLIT.split(raw) if 1 < len(t) < 30 and not t.isdigit())


def _is_hidden(attrs: dict[str, str | None]) -> bool:
    if "hidden" in attrs or attrs.get("aria-hidden") == "true":
        return True
    style = attrs.get("style")
    return bool(style and HIDDEN_STYLE.search(style))


def normalise(text: str) -> str:
    """Collapse whitespace within lines, drop empty lines."""
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


class _Builder:
    """Walks the tree once, collecting runs of inline text into blocks."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.container_words: list[int] = []
        self.container_link_words: list[int] = []
        self.container_blocks: list[int] = []
        self.pieces: list[str] = []
        self.nodes: list[LexborNode] = []
        self.link_words = 0
        self.links = 0
        self.truncated = False
        self.token_cache: dict[str, tuple[tuple[str, ...], int]] = {}

    def new_container(self) -> int:
        self.container_words.append(0)
        self.container_link_words.append(0)
        self.container_blocks.append(0)
        return len(self.container_words) - 1

    def add(self, block: Block) -> None:
        if len(self.blocks) >= MAX_BLOCKS:
            self.truncated = True
            return
        self.blocks.append(block)
        for cid in block.containers:
            self.container_words[cid] += block.n_words
            self.container_link_words[cid] += block.n_link_words
            self.container_blocks[cid] += 1

    def flush(self, frame: _Frame) -> None:
        if not self.pieces:
            return
        text = normalise("".join(self.pieces))[:MAX_BLOCK_CHARS]
        nodes, link_words, links = self.nodes, self.link_words, self.links
        self.pieces, self.nodes, self.link_words, self.links = [], [], 0, 0
        if not text:
            return
        n_words = len(text.split())
        self.add(
            Block(
                id=len(self.blocks),
                text=text,
                tag=frame.tag,
                flags=frame.flags,
                depth=frame.depth,
                n_words=n_words,
                n_link_words=min(link_words, n_words),
                n_links=links,
                containers=frame.containers,
                tokens=frame.tokens,
                own_tokens=frame.own_tokens,
                nodes=nodes,
                sections=frame.sections,
            )
        )

    def atomic(self, node: LexborNode, frame: _Frame, tag: str) -> None:
        raw = node.text(deep=True, separator="\n" if tag != "pre" else "")
        text = normalise(raw)[:MAX_BLOCK_CHARS] if tag != "pre" else raw.strip()[:MAX_BLOCK_CHARS]
        if not text.strip():
            return
        anchors = node.css("a")
        link_words = sum(len(a.text(deep=True).split()) for a in anchors)
        n_words = len(text.split())
        self.add(
            Block(
                id=len(self.blocks),
                text=text,
                tag=tag,
                flags=frame.flags,
                depth=frame.depth,
                n_words=n_words,
                n_link_words=min(link_words, n_words),
                n_links=len(anchors),
                containers=frame.containers,
                tokens=frame.tokens,
                own_tokens=frame.own_tokens,
                nodes=[node],
                atomic=True,
                sections=frame.sections,
            )
        )


def _child_frame(builder: _Builder, parent: _Frame, node: LexborNode, tag: str) -> _Frame:
    attrs = node.attributes
    flags = parent.flags | TAG_FLAGS.get(tag, 0)
    own: tuple[str, ...] = ()
    sections = parent.sections
    if attrs:
        key = f"{attrs.get('class') or ''} {attrs.get('id') or ''}"
        cached = builder.token_cache.get(key)
        if cached is None:
            words = class_tokens(attrs)
            bits = 0
            for word in words:
                bits |= SECTION_BITS.get(word, 0)
            cached = builder.token_cache[key] = (words, bits)
        own, own_bits = cached
        sections |= own_bits
    if attrs and _is_hidden(attrs):
        flags |= F_HIDDEN
    tokens = parent.tokens
    if own:
        tokens = (own + tokens)[: MAX_TOKEN_ANCESTORS * 4]
    block = tag not in INLINE_TAGS
    if block:
        cid = builder.new_container()
        containers = (cid, *parent.containers)[:MAX_CONTAINERS]
    else:
        cid, containers = parent.container, parent.containers
    return _Frame(
        tag=tag if block else parent.tag,
        flags=flags,
        link=parent.link or tag == "a",
        container=cid,
        containers=containers,
        tokens=tokens,
        own_tokens=own if block else parent.own_tokens,
        depth=parent.depth + 1,
        block=block,
        sections=sections,
    )


def _has_breaker(node: LexborNode) -> bool:
    """True when a list or table holds paragraph-like structure (css_first would also match itself)."""
    child = node.child
    while child is not None:
        if child.is_element_node and (child.tag in BREAKER_TAGS or child.css_first(ATOMIC_BREAKERS)):
            return True
        child = child.next
    return False


def cap_depth(html: str, max_depth: int = MAX_DEPTH) -> tuple[str, bool]:
    """Cut `html` where its element nesting would exceed `max_depth`; (html, was_cut)."""
    if html.count("<") < DEPTH_SCAN_MIN_TAGS:
        return html, False
    depth = 0
    for match in TAG_RE.finditer(html):
        closing, name, selfclose = match.groups()
        if selfclose or name.lower() in FLAT_TAGS:
            continue
        depth += -1 if closing else 1
        if depth > max_depth:
            return html[: match.start()], True
    return html, False


def _walk(builder: _Builder, body: LexborNode) -> None:
    """Iterative depth-first walk (deeply nested pages must not hit the recursion limit)."""
    root = _Frame("body", 0, False, builder.new_container(), (0,), (), (), 0, True)
    stack: list[tuple[LexborNode | None, _Frame]] = [(body.child, root)]
    block_frames: list[_Frame] = [root]
    while stack:
        node, frame = stack[-1]
        if node is None:
            stack.pop()
            if frame.block:
                builder.flush(frame)
                block_frames.pop()
            continue
        stack[-1] = (node.next, frame)
        if node.is_text_node:
            content = node.text_content
            if content and not content.isspace():
                builder.pieces.append(content.replace("\n", " "))
                builder.nodes.append(node)
                if frame.link:
                    builder.link_words += len(content.split())
            elif content and builder.pieces:
                builder.pieces.append(" ")
            continue
        if not node.is_element_node:
            continue
        tag = node.tag or ""
        if tag in DROP_TAGS:
            continue
        if tag == "br":
            builder.pieces.append("\n")
            continue
        if tag == "hr":
            builder.flush(block_frames[-1])
            continue
        child = _child_frame(builder, frame, node, tag)
        if tag == "a":
            builder.links += 1
        if child.block:
            builder.flush(block_frames[-1])
            if tag in ATOMIC_TAGS and (tag == "pre" or not _has_breaker(node)):
                builder.atomic(node, child, tag)
                continue
            block_frames.append(child)
        stack.append((node.child, child))


def _title(tree: LexborHTMLParser) -> str:
    node = tree.css_first("title")
    return " ".join(node.text().split()) if node is not None else ""


def simplify(html: str) -> SimplePage:
    """Parse `html` and split its body into blocks; never raises on malformed markup."""
    truncated = len(html) > MAX_HTML_CHARS
    if truncated:
        html = html[:MAX_HTML_CHARS]
    empty = SimplePage([], "", [], [], [], truncated=truncated)
    if not html or html.isspace():
        empty.reason = "empty"
        return empty
    if "\x00" in html:
        html = html.replace("\x00", "")
    html, cut = cap_depth(html)
    truncated = truncated or cut
    tree = LexborHTMLParser(html)
    body = tree.body
    if body is None:
        empty.reason = "no_body"
        return empty
    builder = _Builder()
    _walk(builder, body)
    page = SimplePage(
        blocks=builder.blocks,
        title=_title(tree),
        container_words=builder.container_words,
        container_link_words=builder.container_link_words,
        container_blocks=builder.container_blocks,
        tree=tree,
        truncated=truncated or builder.truncated,
        n_words=sum(b.n_words for b in builder.blocks),
        source=html,
    )
    if not page.blocks:
        page.reason = "too_deep" if cut else "no_text"
    return page
