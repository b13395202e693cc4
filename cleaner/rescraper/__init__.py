"""`rescraper_v1`: ReScraper (Yu et al., 2026), one 0.6B model that extracts and refines a page in one answer.

page_lines.py renders the page as `<lid:N>` lines, generate.py asks the model (vLLM on a GPU, transformers
on a CPU), program.py checks the answer against its grammar and applies it; rescraper_cleaner.py is the
cleaner.
"""
