"""A local web of many virtual hosts with known quality, for demos and tests of the crawler."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.testweb.cli import register_cli
    from crawler.testweb.config import TestWebConfig
    from crawler.testweb.model import HostSpec, SiteModel
    from crawler.testweb.process import TestWebProcess
    from crawler.testweb.server import TestWeb
    from crawler.testweb.site import Rendered

# Loaded on first use (PEP 562): the command line imports the test web's options without its server.
_HOMES = {
    "register_cli": "cli",
    "TestWebConfig": "config",
    "HostSpec": "model",
    "SiteModel": "model",
    "TestWebProcess": "process",
    "TestWeb": "server",
    "Rendered": "site",
}

__all__ = [
    "HostSpec",
    "Rendered",
    "SiteModel",
    "TestWeb",
    "TestWebConfig",
    "TestWebProcess",
    "register_cli",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
