"""MinerU-HTML's page simplification: the input format of Dripper's and Pulpie's models.

Both published model families read a page simplified by MinerU-HTML's rules: one block per
`_item_id`, at most 500 characters of text each, and label blocks by that id; the main content
is then cut from the original DOM marked with the same ids. This package reproduces it byte for
byte (tests/test_mineru_parity.py compares it with both packages on the WCXB pages), so neither
package, nor its torch/transformers pins, is needed at run time. It needs only lxml and selectolax.
"""

from cleaner.mineru.items import MAIN, OTHER, extract_blocks, extract_item_ids, extract_main_html
from cleaner.mineru.mineru_simplify import CUTOFF_LENGTH, simplify_html

__all__ = [
    "CUTOFF_LENGTH",
    "MAIN",
    "OTHER",
    "extract_blocks",
    "extract_item_ids",
    "extract_main_html",
    "simplify_html",
]
