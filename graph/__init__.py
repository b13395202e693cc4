"""Host graph: Common Crawl ranks/vertices/edges ingest, host names, centrality and the scheduler's priors."""
