"""Host graph (later issue): Common Crawl ranks ingest, host-name normalisation, centrality priors."""
