"""Main text of graded webs: mediocre pages (low quality that reads as text) and short good ones.

Junk (text.LOW_TYPES) is easy: every scorer rejects it. Real low-quality pages are mostly grammatical
and thin, templated or garbled in ways rules half-see; these kinds are written so that the default
scorer's scores of them overlap those of high-quality pages, and so that scorers disagree about them
(heuristic_v1 rejects listing blurbs that heuristic_v3 passes). Short high-quality pages score lower
than long ones, so the overlap is on both sides.
"""

from __future__ import annotations

import random

from crawler.testweb.text import (
    CJK_FULL_STOP,
    PARAGRAPHS_HIGH,
    SENTENCES_PER_PARAGRAPH,
    Lexicon,
    MainContent,
    sentence,
    title_for,
)

MEDIOCRE_TYPES = ("thin_prose", "seo_filler", "listing_blurbs", "chit_chat", "machine_translated")
THIN_SENTENCES = (4, 7)  # one short paragraph: around the 50 words a document needs
SEO_PARAGRAPHS = (2, 4)
SEO_SENTENCES = (3, 5)
BLURB_ITEMS = (6, 12)
BLURB_ELLIPSIS_SHARE = 0.35  # blurbs cut off with an ellipsis: near the 30% line rule
CHAT_POSTS = (8, 16)
CHAT_WORDS = (2, 7)
SHORT_HIGH_PARAGRAPHS = (2, 2)
MT_PARAGRAPHS = PARAGRAPHS_HIGH  # as long as a good article: length gives nothing away
MT_SENTENCES = SENTENCES_PER_PARAGRAPH
SHUFFLE_SHARE = 0.7  # sentences of a machine-translated-looking page with their words out of order


def _join(lex: Lexicon, sentences: list[str]) -> str:
    return ("" if lex.full_stop == CJK_FULL_STOP else " ").join(sentences)


def _shuffled(rng: random.Random, lex: Lexicon, text: str) -> str:
    """A sentence's words in another order, its capital and full stop kept: reads as a bad translation."""
    body = text.removesuffix(lex.full_stop) if lex.full_stop else text
    words = body.split(lex.sep) if lex.sep else list(body)
    if len(words) < 3:
        return text
    head, rest = words[0], words[1:]
    rng.shuffle(rest)
    return lex.sep.join([head, *rest]) + lex.full_stop


def mediocre_content(rng: random.Random, lex: Lexicon, kind: str, mediocre_type: str) -> MainContent:
    """Main text of one MEDIOCRE_TYPES kind."""
    topic = lex.topics[kind]
    if mediocre_type == "thin_prose":
        content = MainContent(title=title_for(rng, lex, topic))
        n = rng.randint(*THIN_SENTENCES)
        content.blocks.append(("p", _join(lex, [sentence(rng, lex, topic) for _ in range(n)])))
    elif mediocre_type == "seo_filler":
        keyword = lex.sep.join((rng.choice(lex.spam), rng.choice(topic)))
        content = MainContent(title=lex.sep.join((keyword, rng.choice(lex.spam))))
        for _ in range(rng.randint(*SEO_PARAGRAPHS)):
            lines = []
            for _ in range(rng.randint(*SEO_SENTENCES)):
                said = sentence(rng, lex, topic).removesuffix(lex.full_stop) if lex.full_stop else ""
                lines.append(lex.sep.join((said or sentence(rng, lex, topic), keyword)) + lex.full_stop)
            content.blocks.append(("p", _join(lex, lines)))
    elif mediocre_type == "listing_blurbs":
        content = MainContent(title=title_for(rng, lex, topic))
        for _ in range(rng.randint(*BLURB_ITEMS)):
            content.blocks.append(("h3", title_for(rng, lex, topic)))
            blurb = sentence(rng, lex, topic)
            if rng.random() < BLURB_ELLIPSIS_SHARE:
                blurb = blurb.removesuffix(lex.full_stop) + " …"
            else:
                blurb = f"{blurb} {lex.ui['read_more']}"
            content.blocks.append(("p", blurb))
    elif mediocre_type == "chit_chat":
        content = MainContent(title=title_for(rng, lex, topic))
        pool = lex.noun + lex.verb + topic + lex.adj
        for _ in range(rng.randint(*CHAT_POSTS)):
            words = [rng.choice(lex.det), *rng.sample(pool, rng.randint(*CHAT_WORDS))]
            ending = rng.choice(("!", "?", "", "!!", "..."))
            content.blocks.append(("p", (words[0][:1].upper() + lex.sep.join(words)[1:]) + ending))
    elif mediocre_type == "machine_translated":
        content = MainContent(title=title_for(rng, lex, topic))
        for _ in range(rng.randint(*MT_PARAGRAPHS)):
            plain = [sentence(rng, lex, topic) for _ in range(rng.randint(*MT_SENTENCES))]
            garbled = [_shuffled(rng, lex, s) if rng.random() < SHUFFLE_SHARE else s for s in plain]
            content.blocks.append(("p", _join(lex, garbled)))
    else:
        raise ValueError(f"unknown mediocre type {mediocre_type!r}")
    return content


def short_high_content(rng: random.Random, lex: Lexicon, kind: str) -> MainContent:
    """A good page with little text: one or two paragraphs of prose."""
    topic = lex.topics[kind]
    content = MainContent(title=title_for(rng, lex, topic))
    for _ in range(rng.randint(*SHORT_HIGH_PARAGRAPHS)):
        n = rng.randint(*SENTENCES_PER_PARAGRAPH)
        content.blocks.append(("p", _join(lex, [sentence(rng, lex, topic) for _ in range(n)])))
    return content
