"""The model behind `study synth`: hosts with a latent quality, and the truth the studies must recover.

Page scores of the primary classifier are Beta(p c, (1 - p) c) around a host mean p ~ Beta(mu kappa, (1 - mu)
kappa), which makes the population ICC1 exactly (c + 1) / (c + 1 + kappa); a host's true quality density is
P(score > threshold | p). Coverage and centrality are Gaussian-copula partners of the host's latent quality;
their latent correlations are calibrated so that the Spearman correlations the studies measure hit the
configured values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from analytics.stats import spearman
from analytics.synth_config import SynthConfig

LANGUAGES = ("en", "de", "fr", "es", "ja", "ru", "pt", "it", "nl", "pl")
NON_ENGLISH_WEIGHTS = (0.2, 0.15, 0.15, 0.12, 0.1, 0.1, 0.07, 0.06, 0.05)
# Which TLDs a host of each language lives on (first entry most likely), as in the real graph.
LANGUAGE_TLDS = {
    "en": (("com", 0.55), ("org", 0.15), ("net", 0.08), ("uk", 0.12), ("us", 0.04), ("au", 0.06)),
    "de": (("de", 0.7), ("com", 0.15), ("at", 0.1), ("org", 0.05)),
    "fr": (("fr", 0.7), ("com", 0.15), ("be", 0.1), ("org", 0.05)),
    "es": (("es", 0.5), ("com", 0.25), ("mx", 0.15), ("ar", 0.1)),
    "ja": (("jp", 0.8), ("com", 0.2)),
    "ru": (("ru", 0.85), ("com", 0.15)),
    "pt": (("br", 0.7), ("pt", 0.2), ("com", 0.1)),
    "it": (("it", 0.85), ("com", 0.15)),
    "nl": (("nl", 0.8), ("com", 0.1), ("be", 0.1)),
    "pl": (("pl", 0.9), ("com", 0.1)),
}
# A long tail of small TLDs, so how many TLDs a crawl reaches depends on its budget (as in the real graph).
TAIL_TLDS = (
    "ae",
    "af",
    "al",
    "am",
    "az",
    "ba",
    "bd",
    "bg",
    "by",
    "ca",
    "ch",
    "cl",
    "cn",
    "co",
    "cr",
    "cz",
    "dk",
    "ec",
    "ee",
    "eg",
    "fi",
    "ge",
    "gr",
    "gt",
    "hk",
    "hr",
    "hu",
    "id",
    "ie",
    "il",
    "in",
    "ir",
    "is",
    "ke",
    "kr",
    "kz",
    "lk",
    "lt",
    "lu",
    "lv",
    "ma",
    "md",
    "mk",
    "mn",
    "my",
    "ng",
    "no",
    "np",
    "nz",
    "pe",
    "ph",
    "pk",
    "py",
    "ro",
    "rs",
    "sa",
    "se",
    "sg",
    "si",
    "sk",
    "th",
    "tn",
    "tr",
    "tw",
    "ua",
    "uy",
    "uz",
    "ve",
    "vn",
    "za",
    "info",
    "biz",
    "edu",
    "gov",
    "io",
    "tv",
    "me",
    "xyz",
    "online",
    "site",
    "club",
)
TAIL_SHARE = 0.12
TLDS = tuple(sorted({t for choices in LANGUAGE_TLDS.values() for t, _ in choices} | set(TAIL_TLDS)))
CALIBRATION_HOSTS = 60_000  # at most; small data sets calibrate on as many hosts as they have (>= 20,000)
MIN_CALIBRATION_HOSTS = 20_000
BISECTION_STEPS = 16
SECOND_CLASSIFIER_AGREEMENT = 0.5  # latent correlation of the language-biased classifier with true quality
CENTRALITY_ENGLISH_SHIFT = 0.6  # English hosts sit higher in the graph (latent sd units)
FETCH_SHARE = 0.5  # the monthly crawl fetches about half of what the yearly crawl database has fetched


@dataclass(slots=True)
class HostDraws:
    """Independent standard draws for a block of hosts; the latent correlations are applied later."""

    z_quality: np.ndarray
    z_second: np.ndarray
    z_coverage: np.ndarray
    z_centrality: np.ndarray
    z_pagerank: np.ndarray
    language: np.ndarray  # index into LANGUAGES
    tld: np.ndarray  # index into TLDS
    records: np.ndarray
    fetch_uniform: np.ndarray  # drives the binomial draws of captures and of GneissWeb pages

    @classmethod
    def draw(cls, rng: np.random.Generator, n: int, english_share: float) -> HostDraws:
        weights = np.array((english_share, *((1 - english_share) * np.array(NON_ENGLISH_WEIGHTS))))
        language = rng.choice(len(LANGUAGES), size=n, p=weights / weights.sum())
        tld = np.empty(n, dtype=np.int16)
        for li, lang in enumerate(LANGUAGES):
            mask = language == li
            names, probs = zip(*LANGUAGE_TLDS[lang], strict=True)
            codes = np.array([TLDS.index(t) for t in names])
            tld[mask] = rng.choice(codes, size=int(mask.sum()), p=np.array(probs) / sum(probs))
        tail = rng.random(n) < TAIL_SHARE
        tail_codes = np.array([TLDS.index(t) for t in TAIL_TLDS])
        tld[tail] = rng.choice(tail_codes, size=int(tail.sum()))
        return cls(
            z_quality=rng.standard_normal(n),
            z_second=rng.standard_normal(n),
            z_coverage=rng.standard_normal(n),
            z_centrality=rng.standard_normal(n),
            z_pagerank=rng.standard_normal(n),
            language=language.astype(np.int8),
            tld=tld,
            records=np.maximum(1, np.rint(np.exp(rng.normal(3.0, 1.5, n)))).astype(np.int64),
            fetch_uniform=rng.random((3, n)),
        )


@dataclass(frozen=True, slots=True)
class Latent:
    """Latent correlations found by calibration (the configured values are Spearman correlations)."""

    coverage: float
    centrality: float


def _phi(z: np.ndarray) -> np.ndarray:
    return np.asarray(special.ndtr(z))


def host_means(cfg: SynthConfig, d: HostDraws) -> tuple[np.ndarray, np.ndarray]:
    """Mean page score per host for the primary and the language-biased classifier."""
    k, mu = cfg.quality_concentration, cfg.quality_mean
    primary = special.betaincinv(mu * k, (1 - mu) * k, _phi(d.z_quality))
    r = SECOND_CLASSIFIER_AGREEMENT
    z2 = r * d.z_quality + np.sqrt(1 - r * r) * d.z_second + cfg.language_bias * (d.language != 0)
    second = special.betaincinv(mu * k, (1 - mu) * k, _phi(z2 / np.sqrt(1 + cfg.language_bias**2 / 4)))
    eps = 1e-6
    return np.clip(primary, eps, 1 - eps), np.clip(second, eps, 1 - eps)


def true_density(cfg: SynthConfig, mean: np.ndarray) -> np.ndarray:
    """P(page score > threshold) for a host whose page scores are Beta(mean c, (1 - mean) c)."""
    c = cfg.page_concentration()
    return np.asarray(special.betainc((1 - mean) * c, mean * c, 1 - cfg.threshold))


def _mix(rho: float, z: np.ndarray, noise: np.ndarray) -> np.ndarray:
    return rho * z + np.sqrt(1 - rho * rho) * noise


def coverage_counts(d: HostDraws, latent_rho: float, density: np.ndarray) -> dict[str, np.ndarray]:
    """Known, fetched and captured URLs per crawled host, and its GneissWeb pages in this crawl."""
    # Most hosts are almost fully crawled (Beta(2, 0.35) has its mass near 1), a long tail barely at all.
    share = special.betaincinv(2.0, 0.35, _phi(_mix(latent_rho, d.z_quality, d.z_coverage)))
    records = d.records
    fetched = np.clip(np.rint(records * share), 1, records).astype(np.int64)
    captured = np.maximum(1, _binomial(fetched, FETCH_SHARE, d.fetch_uniform[0]))
    good = _binomial(captured, density, d.fetch_uniform[1])
    return {"records": records, "fetched": fetched, "captured": captured, "good": good}


def _binomial(n: np.ndarray, p: np.ndarray | float, u: np.ndarray) -> np.ndarray:
    """Binomial(n, p) by inversion of a normal approximation: one uniform per host keeps draws coupled."""
    mean = n * p
    sd = np.sqrt(np.maximum(n * np.asarray(p) * (1 - np.asarray(p)), 0))
    z = special.ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    return np.clip(np.rint(mean + sd * z), 0, n).astype(np.int64)


def centrality(d: HostDraws, latent_rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Raw harmonic centrality and PageRank, both log-normal around CC-like magnitudes."""
    z = _mix(latent_rho, d.z_quality, d.z_centrality) + CENTRALITY_ENGLISH_SHIFT * (d.language == 0)
    hc = 10 ** (6.5 + 0.35 * z)
    pr = 10 ** (-8.8 + 0.5 * _mix(0.8, z / np.sqrt(1 + CENTRALITY_ENGLISH_SHIFT**2 / 4), d.z_pagerank))
    return hc, pr


def observed_density(counts: dict[str, np.ndarray]) -> np.ndarray:
    return counts["good"] / counts["captured"]


def _bisect(measure: object, target: float) -> float:
    """The latent rho in [-0.99, 0.99] whose measured Spearman equals target (measure is increasing)."""
    assert callable(measure)
    low, high = -0.99, 0.99
    for _ in range(BISECTION_STEPS):
        mid = (low + high) / 2
        if measure(mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def calibrate(cfg: SynthConfig) -> Latent:
    """Latent correlations that make the measured Spearman correlations equal the configured ones."""
    rng = np.random.default_rng([cfg.seed, 0xCA1])
    d = HostDraws.draw(rng, min(CALIBRATION_HOSTS, max(cfg.hosts, MIN_CALIBRATION_HOSTS)), cfg.english_share)
    primary, _ = host_means(cfg, d)
    density = true_density(cfg, primary)

    def coverage_rho(rho: float) -> float:
        counts = coverage_counts(d, rho, density)
        pct = np.rint(100 * counts["fetched"] / counts["records"])
        return spearman(pct, observed_density(counts))

    def centrality_rho(rho: float) -> float:
        return spearman(centrality(d, rho)[0], density)

    return Latent(
        coverage=_bisect(coverage_rho, cfg.coverage_quality_rho),
        centrality=_bisect(centrality_rho, cfg.centrality_quality_rho),
    )


def pages_per_host(cfg: SynthConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """Log-normal page counts with the configured mean (at least one page each)."""
    sigma = cfg.pages_sigma
    mu = np.log(max(cfg.pages_per_host - 0.5, 0.5)) - sigma * sigma / 2
    return np.maximum(1, np.rint(np.exp(rng.normal(mu, sigma, n)))).astype(np.int64)


def page_scores(
    cfg: SynthConfig, rng: np.random.Generator, means: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Beta page scores around each host's mean, one row per page, hosts in order."""
    c = cfg.page_concentration()
    per_page = np.repeat(means, counts)
    return np.asarray(rng.beta(per_page * c, (1 - per_page) * c))
