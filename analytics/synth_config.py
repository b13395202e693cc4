"""The configurable truth of `study synth`, apart from the generator (numpy, scipy): the command line builds
its options from these defaults without loading either."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class SynthConfig:
    """The configurable truth of a generated data set."""

    hosts: int = 100_000
    page_hosts: int | None = None  # hosts in pages.parquet; default min(hosts, 20,000)
    pages_per_host: float = 5.0
    pages_sigma: float = 1.0  # log-normal spread of pages per host (a heavy tail, as in a WARC sample)
    icc: float = 0.5
    quality_mean: float = 0.3
    quality_concentration: float = 4.0
    threshold: float = 0.5
    coverage_quality_rho: float = -0.08
    centrality_quality_rho: float = 0.1
    english_share: float = 0.55
    language_bias: float = 0.8  # latent shift of the second classifier on non-English hosts
    link_only_ratio: float = 1.0  # host-index rows known only from links, per crawled host
    crawl: str = "CC-MAIN-2024-10"
    release: str = "cc-main-2024-feb-apr-may"
    seed: int = 0
    classifiers: tuple[str, ...] = field(default=("edu", "biased"))

    def resolved_page_hosts(self) -> int:
        return min(self.hosts, self.page_hosts if self.page_hosts is not None else 20_000)

    def page_concentration(self) -> float:
        """c such that the population ICC1 of page scores is `icc`."""
        return self.quality_concentration * self.icc / (1 - self.icc) - 1

    def validate(self) -> None:
        if self.hosts < 10:
            raise ValueError("--hosts must be at least 10")
        if not 0 < self.icc < 1:
            raise ValueError("--icc must lie strictly between 0 and 1")
        if self.page_concentration() <= 0:
            raise ValueError(
                f"--icc {self.icc} needs a quality concentration above {(1 - self.icc) / self.icc:.3g} "
                f"(got {self.quality_concentration})"
            )
        for name in ("coverage_quality_rho", "centrality_quality_rho"):
            if not -0.95 <= getattr(self, name) <= 0.95:
                raise ValueError(f"--{name.replace('_', '-')} must lie in [-0.95, 0.95]")
        if not 0 <= self.english_share <= 1:
            raise ValueError("--english-share must lie in [0, 1]")
        if self.pages_per_host < 1:
            raise ValueError("--pages-per-host must be at least 1")
