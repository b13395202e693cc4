"""Studies in DuckDB/polars (later issue): ICC1, k-sample curves, yield and coverage simulations."""
