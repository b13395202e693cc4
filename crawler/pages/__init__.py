"""What a fetched page becomes: cleaned and scored in a process pool, its row in the page spool,
curated text shards, and the run's parquet tables and deduplicated text."""
