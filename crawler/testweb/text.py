"""Main text of test-web pages: coherent prose for high-quality pages, five kinds of junk."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from importlib import resources

LANGUAGES = ("en", "de", "fr", "es")  # the default test web's languages (its ground truth is kept stable)
# every language with a word list: a test web built with `languages=ALL_LANGUAGES` is multilingual
ALL_LANGUAGES = (*LANGUAGES, "pt", "ru", "ar", "zh", "ja", "th", "hi")
CJK_FULL_STOP = "。"  # sentences that end in it follow each other without a space
LOW_TYPES = ("keyword_spam", "link_farm", "thin", "word_salad", "seo_list")

PARAGRAPHS_HIGH = (3, 7)
SENTENCES_PER_PARAGRAPH = (3, 6)
LIST_CHANCE = 0.4  # share of high pages with a subheading and a bulleted list
ADJ_CHANCE = 0.5  # share of noun phrases with an adjective
LINK_FARM_LINKS = (30, 80)
SPAM_LINES = (4, 8)
SPAM_WORDS_PER_LINE = (15, 30)
SEO_UNIQUE_LINES = 5
SEO_LINES = (30, 60)


@dataclass(frozen=True, slots=True)
class Lexicon:
    """A language's small word lists, read from words/<lang>.txt."""

    language: str
    adj_after: bool
    sep: str  # between words: " ", or "" in languages written without spaces (zh, ja, th)
    full_stop: str  # ends a sentence: ".", "。", or "" in Thai (which ends a sentence with a space)
    det: tuple[str, ...]
    prep: tuple[str, ...]
    stop: frozenset[str]
    conn: tuple[str, ...]
    adj: tuple[str, ...]
    noun: tuple[str, ...]
    verb: tuple[str, ...]
    spam: tuple[str, ...]
    topics: dict[str, tuple[str, ...]]
    ui: dict[str, str]


@dataclass(slots=True)
class MainContent:
    """A page's main content as (tag, text) blocks that templates render and cleaners keep."""

    title: str
    blocks: list[tuple[str, str]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, anchor) inside the main area

    def text(self) -> str:
        parts = [self.title, *(t for _, t in self.blocks), *(a for _, a in self.links)]
        return "\n\n".join(p for p in parts if p)


def _parse_lexicon(language: str, raw: str) -> Lexicon:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in raw.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
        else:
            sections[current].append(line)

    def words(name: str) -> tuple[str, ...]:
        return tuple(" ".join(sections.get(name, [])).split())

    def keyed(name: str) -> dict[str, str]:
        pairs = (line.split("=", 1) for line in sections.get(name, []))
        return {k.strip(): v.strip() for k, v in pairs}

    conn = tuple(c.strip() for c in " ".join(sections["conn"]).split("|") if c.strip())
    topics = {name.split(":", 1)[1]: words(name) for name in sections if name.startswith("topic:")}
    meta = keyed("meta")
    return Lexicon(
        language=language,
        adj_after=meta.get("adj_after") == "yes",
        sep="" if meta.get("spaces") == "no" else " ",
        full_stop=meta.get("full_stop", "."),
        det=words("det"),
        prep=words("prep"),
        stop=frozenset(w.lower() for w in words("stop")),
        conn=conn,
        adj=words("adj"),
        noun=words("noun"),
        verb=words("verb"),
        spam=words("spam"),
        topics=topics,
        ui=keyed("ui"),
    )


def load_lexicons(languages: tuple[str, ...] = LANGUAGES) -> dict[str, Lexicon]:
    """Read the shipped word lists; callers keep the result (no module-level cache)."""
    folder = resources.files("crawler.testweb") / "words"
    return {
        lang: _parse_lexicon(lang, (folder / f"{lang}.txt").read_text(encoding="utf-8")) for lang in languages
    }


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _noun_phrase(rng: random.Random, lex: Lexicon, nouns: tuple[str, ...]) -> str:
    noun = rng.choice(nouns)
    det = rng.choice(lex.det)
    if rng.random() >= ADJ_CHANCE:
        return lex.sep.join((det, noun))
    adj = rng.choice(lex.adj)
    return lex.sep.join((det, noun, adj) if lex.adj_after else (det, adj, noun))


def sentence(rng: random.Random, lex: Lexicon, topic: tuple[str, ...]) -> str:
    """A grammatical-looking sentence: subject, verb, object, sometimes a connective or place."""
    subj = _noun_phrase(rng, lex, topic if rng.random() < 0.5 else lex.noun)
    obj = _noun_phrase(rng, lex, topic if rng.random() < 0.5 else lex.noun)
    verb = rng.choice(lex.verb)
    pattern = rng.randrange(4)
    if pattern == 0:
        place = _noun_phrase(rng, lex, lex.noun)
        parts: tuple[str, ...] = (subj, verb, obj, rng.choice(lex.prep), place)
    elif pattern == 1:
        parts = (rng.choice(lex.conn), subj, verb, obj)
    elif pattern == 2:
        parts = (subj, rng.choice(lex.prep), _noun_phrase(rng, lex, topic), verb, obj)
    else:
        parts = (subj, verb, obj)
    return _cap(lex.sep.join(parts)) + lex.full_stop


def title_for(rng: random.Random, lex: Lexicon, topic: tuple[str, ...]) -> str:
    adj, noun = rng.choice(lex.adj), rng.choice(topic)
    phrase = (noun, adj) if lex.adj_after else (adj, noun)
    return _cap(lex.sep.join((*phrase, rng.choice(lex.prep), _noun_phrase(rng, lex, lex.noun))))


def high_content(rng: random.Random, lex: Lexicon, kind: str) -> MainContent:
    """Multi-paragraph prose with a title and sometimes a subheading and list."""
    topic = lex.topics[kind]
    content = MainContent(title=title_for(rng, lex, topic))
    n_par = rng.randint(*PARAGRAPHS_HIGH)
    list_at = rng.randrange(1, n_par) if rng.random() < LIST_CHANCE else -1
    for i in range(n_par):
        if i == list_at:
            content.blocks.append(("h2", title_for(rng, lex, topic)))
            for _ in range(rng.randint(3, 5)):
                content.blocks.append(("li", sentence(rng, lex, topic)))
        n_sent = rng.randint(*SENTENCES_PER_PARAGRAPH)
        between = "" if lex.full_stop == CJK_FULL_STOP else " "
        content.blocks.append(("p", between.join(sentence(rng, lex, topic) for _ in range(n_sent))))
    return content


def low_content(
    rng: random.Random, lex: Lexicon, kind: str, low_type: str, link_pool: list[str]
) -> MainContent:
    """Junk main text of one LOW_TYPES kind; link_pool gives hrefs for link farms."""
    topic = lex.topics[kind]
    keywords = rng.sample(lex.spam, 3) + rng.sample(topic, 2)
    if low_type == "keyword_spam":
        content = MainContent(title=" ".join(keywords))
        for _ in range(rng.randint(*SPAM_LINES)):
            n = rng.randint(*SPAM_WORDS_PER_LINE)
            content.blocks.append(("p", " ".join(rng.choice(keywords) for _ in range(n))))
    elif low_type == "link_farm":
        content = MainContent(title=f"{keywords[0]} {keywords[3]} {keywords[1]}")
        for _ in range(rng.randint(*LINK_FARM_LINKS)):
            anchor = f"{rng.choice(keywords)} {rng.choice(topic)} {rng.choice(lex.spam)}"
            content.links.append((rng.choice(link_pool) if link_pool else "/", anchor))
    elif low_type == "thin":
        content = MainContent(title=_cap(rng.choice(topic)))
        content.blocks.append(("p", lex.ui["empty"]))
    elif low_type == "word_salad":
        pool = lex.adj + lex.noun + lex.verb + topic
        content = MainContent(title=" ".join(rng.sample(pool, 3)))
        for _ in range(rng.randint(*SPAM_LINES)):
            n = rng.randint(*SPAM_WORDS_PER_LINE)
            words = [w.upper() if rng.random() < 0.1 else w for w in rng.choices(pool, k=n)]
            content.blocks.append(("p", " ".join(words)))
    elif low_type == "seo_list":
        unique = [
            " ".join(
                (
                    rng.choice(lex.spam),
                    rng.choice(topic),
                    rng.choice(lex.noun),
                    rng.choice(lex.spam),
                )
            )
            for _ in range(SEO_UNIQUE_LINES)
        ]
        content = MainContent(title=unique[0])
        for _ in range(rng.randint(*SEO_LINES)):
            content.blocks.append(("li", rng.choice(unique)))
    else:
        raise ValueError(f"unknown low type {low_type!r}")
    return content
