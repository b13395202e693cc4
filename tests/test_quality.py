"""The heuristic scorer ranks real prose above spam, link farms, salad, SEO lists and chrome."""

from __future__ import annotations

import gzip
import math
import multiprocessing
import pickle
import random
from concurrent.futures import ProcessPoolExecutor

import pytest
from shared_data import require_shared_data

from cleaner import PageResult, process_page
from cleaner.quality import QualityScorer, get_scorer, scorer_names

MIN_AUC = 0.95
MIN_MEAN_GAP = 0.4  # mean(high) - mean(low): the classes must be far apart, not just ordered

PROSE = [
    """The first thing most visitors notice about the old harbour is the smell of tar and salt.
Fishing boats have tied up along the eastern wall for more than three hundred years, and the
wooden posts that hold their ropes are worn smooth by generations of hands.

In the early morning the crews unload their catch onto the quay, where buyers from the inland
markets wait with their vans. Prices are agreed quickly, often with little more than a nod, and
by eight o'clock most of the fish has already left the town.

The harbour master, who has held the post for nineteen years, says the biggest change he has
seen is not in the boats but in the weather. Storms arrive with less warning than they used to,
and the council has twice had to repair the breakwater since the winter of 2019.""",
    """Sourdough bread relies on a culture of wild yeast and lactic acid bacteria rather than on
commercial yeast. The culture, usually called a starter, is kept alive by feeding it flour and
water every day or two.

Because the bacteria produce acid as they ferment, the finished loaf has a slightly sour taste
and keeps fresh for longer than ordinary bread. The long fermentation also breaks down some of
the proteins in the flour, which is why some people find sourdough easier to digest.

Beginners often worry that their starter has died when it stops bubbling. In most cases it is
simply hungry. A few regular feedings at room temperature are usually enough to bring it back,
and a healthy starter should double in size within six to eight hours of being fed.""",
    """When the committee met on Tuesday, the main question was whether the library should stay
open on Sunday afternoons. Attendance figures collected over the past year show that Sunday is
the second busiest day of the week, especially for families with young children.

Several members argued that the extra hours were expensive, because staff who work at the
weekend are paid a higher rate. Others pointed out that the cost is small compared with the
total budget and that closing on Sundays would hit the people who cannot visit during the week.

In the end the committee voted to keep the Sunday hours for another twelve months and to review
the decision once the new community centre has opened next door. The chair thanked the
residents who had written in and said that their letters had made a real difference.""",
    """Honey bees communicate the location of food through a movement known as the waggle dance.
A forager that has found a rich patch of flowers returns to the hive and runs in a figure of
eight on the vertical surface of the comb.

The angle of the straight part of the dance, measured against the vertical, tells the other
bees the direction of the flowers relative to the sun. The length of the waggle run tells them
how far away the flowers are, and the energy of the dance reflects how good the source is.

This remarkable system was first described in detail by Karl von Frisch, who shared the Nobel
Prize for his work in 1973. Later researchers used robotic bees to confirm that the dance alone
is enough to send recruits to a particular spot, even when no scent is available to guide them.""",
    """Learning to play the piano as an adult is different from learning as a child, but it is
far from impossible. Adults usually understand music theory more quickly, and they are often
better at planning their practice and noticing their own mistakes.

The main challenge is time. Most adult learners have jobs and families, and it can be hard to
find a quiet half hour every day. Teachers generally recommend short, regular sessions over
long ones at the weekend, because the fingers learn through repetition spread over many days.

It also helps to choose pieces that you genuinely enjoy. Progress feels slow at first, and a
piece you love will keep you at the keyboard on the evenings when you would rather do
something else. After a year of steady practice, many adults are surprised by how far they
have come.""",
]

PROSE_DE_FR_ES = [
    """Die Stadtbibliothek hat in diesem Jahr mehr Besucher gezählt als je zuvor. Vor allem am
Wochenende kommen viele Familien mit Kindern, die sich Bücher und Spiele ausleihen.

Die Leiterin der Bibliothek erklärt, dass die neuen Öffnungszeiten und die renovierten
Leseräume eine große Rolle gespielt haben. Außerdem gibt es seit dem Frühjahr ein Café im
Erdgeschoss, in dem man auch ohne Bibliotheksausweis sitzen und lesen kann.

Für das kommende Jahr plant die Stadt, das Angebot für Jugendliche zu erweitern. Geplant sind
Workshops zum Programmieren, ein Lesekreis und regelmäßige Abende mit Autorinnen und Autoren
aus der Region, die über ihre Arbeit sprechen.""",
    """Le marché couvert de la ville a rouvert ses portes après deux ans de travaux. Les
habitants ont retrouvé avec plaisir leurs commerçants habituels, qui étaient installés sur la
place de la mairie pendant toute la durée du chantier.

La nouvelle halle est plus lumineuse et mieux ventilée que l'ancienne. Les architectes ont
conservé la charpente métallique d'origine, qui date de la fin du dix-neuvième siècle, mais ils
ont remplacé la toiture et ajouté de grandes baies vitrées sur les côtés.

Selon le maire, le projet a coûté un peu plus que prévu, mais il devrait attirer de nouveaux
visiteurs dans le centre et soutenir les petits producteurs de la région, qui vendent ici leurs
fruits, leurs légumes et leurs fromages.""",
    """El ayuntamiento ha presentado un plan para plantar más de dos mil árboles en los barrios
del sur de la ciudad durante los próximos cinco años. El objetivo es reducir la temperatura en
las calles durante el verano y mejorar la calidad del aire.

Los técnicos municipales han elegido especies que necesitan poca agua y que resisten bien el
calor, como el almez y la encina. Además, cada árbol tendrá un sistema de riego por goteo
conectado a una red de agua reciclada.

Los vecinos podrán proponer calles y plazas a través de una página web, y las escuelas del
barrio participarán en las primeras plantaciones, que empezarán en otoño cuando las lluvias
hagan más fácil el trabajo.""",
]


def one_paragraph_per_line(text: str) -> str:
    """Unwrap the literals above into what the cleaner emits: one paragraph per line."""
    return "\n".join(" ".join(block.split()) for block in text.split("\n\n"))


PROSE = [one_paragraph_per_line(text) for text in PROSE]
PROSE_DE_FR_ES = [one_paragraph_per_line(text) for text in PROSE_DE_FR_ES]

_SPAM_TERMS = [
    "cheap flights",
    "best price",
    "buy now",
    "discount shoes",
    "free shipping",
    "online casino",
    "weight loss pills",
    "payday loans",
    "replica watches",
    "seo services",
]
_SALAD_TEXT = (
    "river window purple engine quickly mountain sugar pencil thunder orange cable garden "
    "velvet rocket silent mirror harvest copper blanket violin tunnel marble ladder pepper "
    "lantern frozen carpet meadow falcon crystal elbow tractor signal biscuit canyon"
)
_CITIES = ["Paris", "Rome", "Berlin", "Madrid", "Vienna", "Prague", "Lisbon", "Dublin", "Oslo"]


def keyword_spam(rng: random.Random) -> str:
    terms = rng.sample(_SPAM_TERMS, 3)
    return " ".join(rng.choice(terms) for _ in range(120))


def link_farm(rng: random.Random) -> str:
    topic = rng.choice(["hotels", "car rental", "dentists", "plumbers", "wedding venues"])
    lines = []
    for _ in range(40):
        city = rng.choice(_CITIES)
        slug = f"{topic.replace(' ', '-')}-{city.lower()}"
        lines.append(f"Best {topic} in {city} - https://{slug}.example.com/{rng.randint(1, 999)}")
    return "\n".join(lines)


def word_salad(rng: random.Random) -> str:
    sentences = []
    for _ in range(25):
        words = rng.choices(_SALAD_TEXT.split(), k=rng.randint(6, 12))
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def seo_duplicate_lines(rng: random.Random) -> str:
    topic = rng.choice(["roof repair", "locksmith", "house cleaning", "tree removal", "movers"])
    lines = []
    for _ in range(6):
        for city in rng.sample(_CITIES, 5):
            lines.append(f"Affordable {topic} near me in {city}")
        lines.append(f"Call now for {topic} quotes")
    return "\n".join(lines)


def thin_boilerplate(rng: random.Random) -> str:
    lines = [
        "Home",
        "About us",
        "Contact",
        "Log in",
        "Sign up for our newsletter",
        "We use cookies to improve your experience. Accept all cookies",
        "Privacy policy | Terms of use",
        f"© {rng.randint(2010, 2025)} Example Media Ltd. All rights reserved.",
    ]
    rng.shuffle(lines)
    return "\n".join(lines)


LOW_KINDS = {
    "keyword_spam": keyword_spam,
    "link_farm": link_farm,
    "word_salad": word_salad,
    "seo_duplicate_lines": seo_duplicate_lines,
    "thin_boilerplate": thin_boilerplate,
}


def low_examples() -> dict[str, list[str]]:
    rng = random.Random(20250101)
    return {kind: [make(rng) for _ in range(5)] for kind, make in LOW_KINDS.items()}


def auc(high: list[float], low: list[float]) -> float:
    """Probability that a random high example outranks a random low one (ties count half)."""
    wins = sum((h > lo) + 0.5 * (h == lo) for h in high for lo in low)
    return wins / (len(high) * len(low))


@pytest.fixture(scope="module")
def scorer() -> QualityScorer:
    return get_scorer("heuristic_v1")


def test_registry_builds_versioned_scorer_and_lists_names_on_typo() -> None:
    assert "heuristic_v1" in scorer_names()
    assert get_scorer("heuristic_v1").name == "heuristic_v1"
    with pytest.raises(ValueError, match="heuristic_v1"):
        get_scorer("heuristic")


def test_prose_outranks_spam_link_farms_salad_seo_lists_and_boilerplate(
    scorer: QualityScorer,
) -> None:
    high = scorer.score_batch(PROSE + PROSE_DE_FR_ES)
    lows = {kind: scorer.score_batch(texts) for kind, texts in low_examples().items()}
    low = [s for scores in lows.values() for s in scores]
    assert auc(high, low) >= MIN_AUC
    gap = sum(high) / len(high) - sum(low) / len(low)
    assert gap >= MIN_MEAN_GAP, f"high {high}, low {lows}"
    for kind, scores in lows.items():
        assert max(scores) < min(high), kind


def test_prose_clears_the_high_quality_bar_in_english_german_french_spanish(
    scorer: QualityScorer,
) -> None:
    assert min(scorer.score_batch(PROSE + PROSE_DE_FR_ES)) > 0.5


def test_scores_stay_in_unit_interval_and_empty_text_scores_zero(scorer: QualityScorer) -> None:
    texts = ["", " \n ", "a", "!!!", "1 2 3", "lorem ipsum dolor sit amet " * 50, *PROSE]
    texts += [t for group in low_examples().values() for t in group]
    for score in scorer.score_batch(texts):
        assert 0.0 <= score <= 1.0 and math.isfinite(score)
    assert scorer.score_one("") == 0.0
    assert scorer.score_one("   \n\t") == 0.0


def test_lorem_ipsum_placeholder_sinks_an_otherwise_good_page(scorer: QualityScorer) -> None:
    assert scorer.score_one(PROSE[0] + "\n\nLorem ipsum dolor sit amet.") < 0.1


def test_each_block_of_page_chrome_lowers_an_article_score_further(
    scorer: QualityScorer,
) -> None:
    chrome = "\n".join(["Home", "About us", "Contact", "Share on Facebook", "Most read", "Log in"])
    scores = [scorer.score_one(PROSE[2] + f"\n{chrome}" * k) for k in range(3)]
    assert scores[0] > scores[1] > scores[2]
    assert scores[1] > 0.0


def test_batch_scores_equal_one_at_a_time_scores(scorer: QualityScorer) -> None:
    texts = PROSE + [t for group in low_examples().values() for t in group]
    assert scorer.score_batch(texts) == [scorer.score_one(t) for t in texts]


def test_process_page_on_a_real_page_returns_text_and_a_heuristic_score() -> None:
    root = require_shared_data("wcxb-dev")
    html = gzip.decompress((root / "html" / "0001.html.gz").read_bytes()).decode("utf-8")
    result = process_page(html, "https://scratchculinary.com/", "trafilatura_v1", ("heuristic_v1",))
    assert result.error is None
    assert result.cleaner == "trafilatura_v1"
    assert result.n_words > 100 and "Fall" in result.text
    assert 0.5 < result.scores["heuristic_v1"] <= 1.0


@pytest.mark.parametrize(
    "html", ["", "\x00\xff" * 100, "<p>" * 2000, "<html><body></body></html>", "<?xml?><a"]
)
def test_process_page_never_raises_on_garbage(html: str) -> None:
    result = process_page(html, "http://x.example/", "trafilatura_v1", ("heuristic_v1",))
    assert isinstance(result, PageResult)
    assert result.scores.keys() == {"heuristic_v1"}
    if result.error is not None:
        assert result.error.startswith("cleaner/")
        assert result.text == "" and result.scores["heuristic_v1"] == 0.0


def test_process_page_reports_unknown_names_instead_of_raising() -> None:
    result = process_page("<p>x</p>", "http://x.example/", "no_such_cleaner", ())
    assert result.error == "cleaner/init/ValueError"
    html = f"<html><body><article><p>{PROSE[0]}</p></article></body></html>"
    result = process_page(html, "http://x.example/", "trafilatura_v1", ("no_such_scorer",))
    assert result.error is not None and result.error.startswith("scorer/no_such_scorer/")


def test_process_page_runs_in_a_spawned_process_pool_and_results_pickle() -> None:
    paragraphs = "".join(f"<p>{line}</p>" for line in PROSE[1].splitlines())
    html = f"<html><body><article>{paragraphs}</article></body></html>"
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result = pool.submit(
            process_page, html, "http://x.example/", "trafilatura_v1", ("heuristic_v1",)
        ).result(timeout=120)
    assert result.error is None and result.scores["heuristic_v1"] > 0.5
    assert pickle.loads(pickle.dumps(result)) == result
