"""HTML -> main content -> quality scores; imports nothing else of ours."""

from cleaner.base import CleanedPage, Cleaner, decode_html
from cleaner.pipeline import PageResult, process_page
from cleaner.registry import cleaner_names, get_cleaner

__all__ = [
    "CleanedPage",
    "Cleaner",
    "PageResult",
    "cleaner_names",
    "decode_html",
    "get_cleaner",
    "process_page",
]
