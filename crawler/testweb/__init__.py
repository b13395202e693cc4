"""A local web of many virtual hosts with known quality, for demos and tests of the crawler."""

from crawler.testweb.cli import register_cli
from crawler.testweb.config import TestWebConfig
from crawler.testweb.model import HostSpec, SiteModel
from crawler.testweb.process import TestWebProcess
from crawler.testweb.server import TestWeb
from crawler.testweb.site import Rendered

__all__ = [
    "HostSpec",
    "Rendered",
    "SiteModel",
    "TestWeb",
    "TestWebConfig",
    "TestWebProcess",
    "register_cli",
]
