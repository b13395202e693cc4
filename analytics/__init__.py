"""Host-level studies in DuckDB (ICC1, k-sample, yield, depth, coverage, language) and their reports."""
