"""One module per study; each `run(...)` writes parquet tables, PNG plots and a markdown section."""
