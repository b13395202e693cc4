"""FineWeb-Edu's classifier through transformers, on a tiny BERT with the published head and config.

The published model (HuggingFaceFW/fineweb-edu-classifier) is a BertForSequenceClassification with
one regression output and 512 positions; the model here has the same head and config keys, is
trained for a few steps on the test web's prose (score 4.5) and junk (score 0.5), and is loaded
through `fineweb_edu=PATH` exactly as the real one would be.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from cleaner.quality import get_scorer
from cleaner.quality.train import auc
from cleaner.quality.transformers_scorer import FineWebEduScorer, int_score
from crawler.testweb.text import high_content, load_lexicons, low_content

STEPS = 120
TRAIN_TOKENS = 64


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    lex = load_lexicons()["en"]
    kinds = sorted(lex.topics)
    high = [high_content(rng, lex, rng.choice(kinds)).text() for _ in range(n)]
    low = [low_content(rng, lex, rng.choice(kinds), "word_salad", ["/x"]).text() for _ in range(n)]
    return high, low


def save_tiny_edu_classifier(path: Path, texts: list[str], num_labels: int = 1) -> Path:
    """A WordPiece tokenizer trained here and a tiny BERT with FineWeb-Edu's regression head."""
    pytest.importorskip("torch")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=1_000, special_tokens=specials))
    tokenizer = BertTokenizerFast(tokenizer_object=tok, model_max_length=512)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
        problem_type="regression" if num_labels == 1 else None,
        pad_token_id=tokenizer.pad_token_id,
    )
    import torch

    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def train(path: Path, high: list[str], low: list[str]) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    texts, targets = high + low, [4.5] * len(high) + [0.5] * len(low)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors this small train faster on one thread
    try:
        steps(model, tokenizer, optimiser, texts, targets)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path)


def steps(model: Any, tokenizer: Any, optimiser: Any, texts: list[str], targets: list[float]) -> None:
    import torch

    rng = random.Random(0)
    for _ in range(STEPS):
        rows = rng.sample(range(len(texts)), 16)
        batch = tokenizer(
            [texts[i] for i in rows], return_tensors="pt", padding=True, truncation=True, max_length=128
        )
        loss = model(**batch, labels=torch.tensor([targets[i] for i in rows])).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


@pytest.fixture(scope="module")
def edu_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    high, low = corpus(60, seed=0)
    path = save_tiny_edu_classifier(tmp_path_factory.mktemp("edu"), high + low)
    train(path, high, low)
    return path


def card_scores(path: Path, texts: list[str]) -> list[float]:
    """The model card's own recipe, one text at a time."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    out = []
    for text in texts:
        inputs = tokenizer(text, return_tensors="pt", padding="longest", truncation=True)
        with torch.no_grad():
            out.append(model(**inputs).logits.squeeze(-1).float().numpy().item())
    return out


def test_fineweb_edu_is_the_regression_logit_clipped_to_0_5_and_scaled(edu_model: Path) -> None:
    scorer: Any = get_scorer(f"fineweb_edu={edu_model}")
    assert isinstance(scorer, FineWebEduScorer) and scorer.name == "fineweb_edu"
    high, low = corpus(3, seed=7)
    texts = [*high, *low, " ".join(high) * 40]  # the last one is far beyond 512 tokens: truncated
    raw = card_scores(edu_model, texts)
    assert scorer.raw_scores(texts) == pytest.approx(raw, abs=1e-4)
    assert scorer.score_batch(texts) == pytest.approx([min(max(r, 0), 5) / 5 for r in raw], abs=1e-5)
    assert scorer.int_scores(texts) == [int_score(r) for r in raw]
    assert scorer.score_batch(["", "  "]) == [0.0, 0.0]


def test_held_out_prose_is_kept_and_junk_is_not(edu_model: Path) -> None:
    scorer: Any = get_scorer(f"fineweb_edu={edu_model}")
    high, low = corpus(20, seed=99)
    scores = scorer.score_batch(high + low)
    assert auc(scores, [True] * len(high) + [False] * len(low)) > 0.9
    kept = [s >= 3 for s in scorer.int_scores(high + low)]
    assert kept == [s > 0.5 for s in scores]  # the int rule and hostcrawl's 0.5 rule agree
    prose, junk = sum(kept[: len(high)]), sum(kept[len(high) :])
    assert prose >= 0.8 * len(high) and junk <= 0.2 * len(low), (prose, junk, scores)


def test_the_keep_rule_is_int_round_of_the_clipped_score_at_least_3() -> None:
    assert [int_score(x) for x in (-1.0, 0.4, 2.5, 2.51, 3.49, 3.5, 4.6, 9.0)] == [0, 0, 2, 3, 3, 4, 5, 5]


def test_a_model_without_a_single_regression_output_is_refused(tmp_path: Path) -> None:
    path = save_tiny_edu_classifier(tmp_path, ["a few words of text"] * 10, num_labels=3)
    with pytest.raises(ValueError, match="one regression output"):
        get_scorer(f"fineweb_edu={path}")
