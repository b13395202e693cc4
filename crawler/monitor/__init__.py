"""Watching a crawl: the status snapshot, the status page and /metrics, the progress line, and a
distributed run's frontier status."""
