"""The published reference packages (pulpie, mineru-html), imported only for parity tests.

Neither imports as a whole here: both repair markup with selectolax's Modest engine, which
selectolax 1.0 removed (`selectolax.parser` raises ImportError), pulpie pins transformers<5 and
mineru-html's package root pulls mineru-webkit. CI installs both with `--no-deps` (.ci/run); these
helpers import their pure-Python modules without running the package roots, with
`selectolax.parser.HTMLParser` standing for Lexbor, the repair step hostcrawl uses. Everything
after that step is the packages' own code.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import os
import sys
import types
from typing import Any

import pytest

from tests.shared_data import require_shared_data

# Every STRIDE-th WCXB dev page (1,358 in all); HOSTCRAWL_PARITY_STRIDE=1 compares every page.
STRIDE = int(os.environ.get("HOSTCRAWL_PARITY_STRIDE", "15"))
PACKAGES = {"pulpie": "pulpie==0.0.2", "mineru_html": "mineru-html==1.1.2"}


def _bare_package(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Register `name` as a namespace for its submodules without executing its __init__."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(name)
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    module.__spec__ = spec
    monkeypatch.setitem(sys.modules, name, module)


def reference_module(monkeypatch: pytest.MonkeyPatch, dotted: str) -> Any:
    """Import `pulpie.x` or `mineru_html.a.b` from the installed package, or skip the test."""
    root = dotted.split(".")[0]
    if importlib.util.find_spec(root) is None:
        pytest.skip(f"{root} is not installed: pip install --no-deps {PACKAGES[root]} (see .ci/run)")
    from selectolax.lexbor import LexborHTMLParser

    shim = types.ModuleType("selectolax.parser")
    shim.HTMLParser = LexborHTMLParser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "selectolax.parser", shim)
    parts = dotted.split(".")
    for depth in range(1, len(parts)):
        _bare_package(monkeypatch, ".".join(parts[:depth]))
    for name in [n for n in sys.modules if n == root or n.startswith(root + ".")]:
        if not isinstance(sys.modules[name], types.ModuleType) or hasattr(sys.modules[name], "__file__"):
            monkeypatch.delitem(sys.modules, name)
    return importlib.import_module(dotted)


def wcxb_pages(stride: int = STRIDE) -> list[tuple[str, str]]:
    """(file name, HTML) of every `stride`-th WCXB dev page."""
    folder = require_shared_data("wcxb-dev") / "html"
    files = sorted(folder.glob("*.html.gz"))[::stride]
    assert files, f"no pages in {folder}"
    return [(f.name, gzip.decompress(f.read_bytes()).decode("utf-8", "replace")) for f in files]
