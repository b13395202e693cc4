"""Lets `python -m crawler.testweb serve ...` run without the hostcrawl console script."""

import sys

from crawler.testweb.cli import main

sys.exit(main())
